"""Trial htrial30: a batch job that starts after its trainer died (it was PENDING when the
trainer was killed with SIGKILL) runs its solver for a whole `lease_timeout` before its
lease watchdog cancels it: the watchdog starts its clock at the job's start
(``since=$SECONDS``), not at the lease's last renewal.

docs/how-to/slurm.md, "A killed trainer": "The script cancels its own job once the file
has not changed for `lease_timeout` seconds". Seen on the one-node test cluster
(2026-12-02): trainer killed 12:01:59, lease_timeout=60; a queued job started 12:03:06
(the lease then 67 s old) and ran its 2-rank solver until 12:04:06. With the default 300 s
and a queue of jobs, each queued job of a dead trainer burns 5 minutes of allocation in
turn (32 queued jobs, 8 slots: 20 minutes).

Run outside Slurm, like tests/launcher/backends/test_slurm_lease.py: the script with a
lease file last written an hour ago and a command shorter than the lease timeout. The
job should be cancelled (the lease is long stale); today the command runs to its end and
exits 0, no cancel.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends.slurm import script as ss

PYTHON = sys.executable


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.xfail(
    strict=True,
    reason="htrial30: the lease watchdog times staleness from the job's start, not from "
    "the lease's last renewal: a job queued when its trainer died runs a full lease_timeout",
)
def test_a_job_starting_on_an_already_stale_lease_is_cancelled(tmp_path: Path) -> None:
    lease = tmp_path / "t.lease"
    lease.write_text("last renewal of a trainer killed an hour ago")
    an_hour_ago = time.time() - 3600
    os.utime(lease, (an_hour_ago, an_hour_ago))
    timeout = 30.0  # the watchdog looks every min(10, timeout/...) s
    command = [PYTHON, "-c", "import time; time.sleep(25)"]  # < timeout: runs to its end today
    text = ss.batch_script(
        name="t",
        argv=command,
        ranks=1,
        cwd=str(tmp_path),
        exit_stem=str(tmp_path / "t"),
        lease=str(lease),
        lease_timeout=timeout,
    )
    script = tmp_path / "t.sbatch"
    script.write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scancel.calls"
    (bin_dir / "scancel").write_text(f'#!/bin/bash\necho "$@" >> {calls}\nexit 1\n')
    (bin_dir / "scancel").chmod(stat.S_IRWXU)
    env = {**os.environ, "SLURM_JOB_ID": "77", "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        start_new_session=True,
    )
    assert "has not renewed the lease" in done.stderr, (done.returncode, done.stderr)
    assert calls.exists() and calls.read_text().split() == ["77"]
