"""The lease of a Slurm study's jobs: `Lease` renews its files until closed, and a batch
script's watchdog ends its job once the trainer stops renewing (run outside Slurm)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from slurm_jobs import pgrep
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends.lease import Lease
from melissa_trainer.launcher.backends.slurm import script as ss

PYTHON = sys.executable


@pytest.mark.timeout(30)
def test_lease_renews_its_files_until_closed(tmp_path: Path) -> None:
    lease = Lease(timeout=0.6)  # renewed every 0.1 s
    path = tmp_path / "a.lease"
    lease.add(path)
    first = path.read_text()
    assert first
    wait_until(lambda: path.read_text() not in ("", first), "a renewal", UNTIL_TEST_TIMEOUT)
    lease.add(path)  # idempotent
    assert lease.paths == [path]
    with pytest.raises(OSError):
        lease.add(tmp_path / "no-such-dir" / "b.lease")
    lease.close()
    assert not path.exists() and lease.paths == []
    lease.close()  # idempotent
    lease.add(path)  # starts afresh
    first = path.read_text()
    wait_until(
        lambda: path.read_text() not in ("", first), "a renewal after a restart", UNTIL_TEST_TIMEOUT
    )
    lease.close()
    assert not path.exists()


def lease_script(tmp_path: Path, argv: list[str], lease: Path, timeout: float) -> Path:
    text = ss.batch_script(
        name="t",
        argv=argv,
        ranks=1,
        cwd=str(tmp_path),
        exit_stem=str(tmp_path / "t"),
        lease=str(lease),
        lease_timeout=timeout,
    )
    path = tmp_path / "t.sbatch"
    path.write_text(text)
    return path


def run_script(tmp_path: Path, script: Path) -> subprocess.CompletedProcess[str]:
    """Run a batch script outside Slurm, in a session of its own (its watchdog's
    fallback signals its process group), with a scancel that records and fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "scancel.calls"
    (bin_dir / "scancel").write_text(f'#!/bin/bash\necho "$@" >> {calls}\nexit 1\n')
    (bin_dir / "scancel").chmod(stat.S_IRWXU)
    env = {**os.environ, "SLURM_JOB_ID": "77", "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}
    return subprocess.run(
        ["bash", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(90)
def test_batch_script_lease_ends_the_job_once_the_trainer_stops_renewing(tmp_path: Path) -> None:
    """Outside Slurm: with its lease renewed, a job runs to its end; a lease left alone
    ends the job (scancel of its own id, here failing, then SIGTERM to its process
    group); a lease the node cannot read leaves the job alone, saying so."""
    marker = f"melissa-lease-{os.getpid()}"
    sleeper = [PYTHON, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]
    # three independent jobs, each in a directory of its own (its scancel's record, its
    # exit file), run at once: each mostly sleeps (9 s one after the other, 4 s at once)
    renewed_dir, stale_dir, missing_dir = (tmp_path / n for n in ("renewed", "stale", "missing"))
    for directory in (renewed_dir, stale_dir, missing_dir):
        directory.mkdir()
    lease = Lease(timeout=2)
    lease.add(renewed_dir / "t.lease")
    (stale_dir / "t.lease").write_text("nobody renews this")
    scripts = [
        (renewed_dir, lease_script(renewed_dir, [*sleeper, "4"], renewed_dir / "t.lease", 2)),
        (stale_dir, lease_script(stale_dir, [*sleeper, "60", marker], stale_dir / "t.lease", 2)),
        (missing_dir, lease_script(missing_dir, [*sleeper, "3"], missing_dir / "x", 2)),
    ]
    try:
        with ThreadPoolExecutor(len(scripts)) as pool:
            renewed, stale, missing = pool.map(lambda job: run_script(*job), scripts)
    finally:
        lease.close()
    assert renewed.returncode == 0, renewed.stderr
    assert not (renewed_dir / "scancel.calls").exists()

    assert stale.returncode == 143, stale.stderr  # the command got SIGTERM
    assert "has not renewed the lease" in stale.stderr and "cancelling job 77" in stale.stderr
    assert (stale_dir / "scancel.calls").read_text().split() == ["77"]
    assert (stale_dir / ss.exit_file("t", "77")).read_text() == "143\n"
    assert not pgrep(marker)

    assert missing.returncode == 0
    assert "cannot read the lease" in missing.stderr
