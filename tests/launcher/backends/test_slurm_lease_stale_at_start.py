"""A batch job that starts after its trainer died (it was PENDING when the trainer was
killed) cancels itself before its command starts: the lease watchdog's clock starts at
the lease's last change, not at the job's start (htrial30: ``since=$SECONDS`` let each
queued job of a dead trainer run its solver a whole `lease_timeout`).

Run outside Slurm, like tests/launcher/backends/test_slurm_lease.py: the script with a
lease file last written an hour ago and a command shorter than the lease timeout: the
job is cancelled, the command never runs. A lease whose modification time looks old
(cached attributes) but whose content still changes (a live trainer) is not.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends.slurm import script as ss

PYTHON = sys.executable


def _run(tmp_path: Path, lease: Path) -> tuple[int, str, Path]:
    """Run the batch script (a lease of 30 s, a command of 25 s that marks its start)
    with a stand-in scancel. Returns its exit status, its stderr, and the scancel
    calls' file."""
    timeout = 30.0  # the watchdog looks every min(10, timeout/...) s
    started = tmp_path / "started"
    code = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(25)"
    command = [PYTHON, "-c", code]  # < timeout: would run to its end
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
    job = subprocess.Popen(
        ["bash", str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = job.communicate(timeout=100)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
            job.wait()
    return job.returncode, stderr, calls


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_job_starting_on_an_already_stale_lease_is_cancelled(tmp_path: Path) -> None:
    lease = tmp_path / "t.lease"
    lease.write_text("last renewal of a trainer killed an hour ago")
    an_hour_ago = time.time() - 3600
    os.utime(lease, (an_hour_ago, an_hour_ago))
    _, stderr, calls = _run(tmp_path, lease)
    assert "has not renewed the lease" in stderr and "before its command starts" in stderr
    assert calls.exists() and calls.read_text().split() == ["77"]
    assert not (tmp_path / "started").exists(), "the solver started"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_an_old_looking_lease_that_still_changes_is_not_cancelled(tmp_path: Path) -> None:
    lease = tmp_path / "t.lease"
    stop = threading.Event()

    def renew_with_an_old_time() -> None:  # content changes; mtime looks an hour old
        n = 0
        while not stop.wait(1.0):
            n += 1
            lease.write_text(f"{n}")
            an_hour_ago = time.time() - 3600
            os.utime(lease, (an_hour_ago, an_hour_ago))

    renew_with_an_old_time_thread = threading.Thread(target=renew_with_an_old_time)
    lease.write_text("0")
    an_hour_ago = time.time() - 3600
    os.utime(lease, (an_hour_ago, an_hour_ago))
    renew_with_an_old_time_thread.start()
    try:
        code, stderr, calls = _run(tmp_path, lease)
    finally:
        stop.set()
        renew_with_an_old_time_thread.join()
    assert code == 0, stderr
    assert not calls.exists()
    assert (tmp_path / "started").exists()
