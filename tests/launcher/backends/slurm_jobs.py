"""Helpers of the Slurm backend's tests against the one-node test cluster
(tests/slurm_cluster.py): test_slurm.py (batch jobs and steps) and test_slurm_study.py
(studies, and the jobs of a trainer that was SIGKILLed); `finish` and `pgrep` serve
every backend's tests (test_mpiexec_backend.py, test_slurm_stand_ins.py and
test_slurm_lease.py too)."""

from __future__ import annotations

import subprocess
import sys
import time

from melissa_trainer.launcher.backends import Backend

PYTHON = sys.executable
POLL = 0.2  # squeue at most every 0.2 s: fast tests on a private cluster


def finish(backend: Backend, handle, timeout: float = 60.0) -> int:  # type: ignore[no-untyped-def]
    """Poll `handle` until its job ends (`timeout` seconds at most): its exit code."""
    deadline = time.monotonic() + timeout
    while (code := backend.poll(handle)) is None:
        assert time.monotonic() < deadline, f"{backend.describe(handle)} did not end"
        time.sleep(0.05)
    return code


def pgrep(marker: str) -> list[str]:
    """The pids of this machine's processes whose command line holds `marker`."""
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()


def queue() -> str:
    """Jobs the cluster still has queued or running: "ID NAME STATE" lines."""
    result = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True)
    return result.stdout.strip()
