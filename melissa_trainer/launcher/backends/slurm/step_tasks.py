"""The tasks of srun steps that run on this node, found without Slurm: for a stop whose
controller does not answer (`SrunSteps`, mode "srun").

An srun signalled while slurmctld does not answer ends (SIGKILLed after `SRUN_END`),
but its tasks do not: srun's "forcing job termination" goes through the controller.
Seen on the one-node test cluster (slurmctld SIGSTOPped, two steps, grace 2 s): the stop
ended in 15.0 s, within its bound of 32 s, and both tasks, one exiting on SIGTERM and one
ignoring it, still ran 15 s later with no SIGTERM received; they were SIGKILLed within
10 s of the controller's resume (it processed the queued requests). So the stop then
ends the tasks it can see: the processes of this node's /proc whose environment names
the allocation and one of the steps (``SLURM_JOB_ID``, ``SLURM_STEP_ID``: slurmstepd
sets them for every task, and a task's children inherit them). Tasks on other nodes
are out of reach: they run on until the controller answers again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection

__all__ = ["kill_tasks", "step_tasks"]

#: seconds to wait for SIGKILLed tasks to be gone (a process in uninterruptible I/O)
GONE_WAIT = 2.0


def _environment(pid: str) -> dict[bytes, bytes]:
    """Process `pid`'s environment ({} if it ended or is not readable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            items = environ.read().split(b"\0")
    except OSError:
        return {}
    return dict(item.split(b"=", 1) for item in items if b"=" in item)


def step_tasks(allocation: str, step_ids: Collection[int]) -> list[int]:
    """The pids of this node's processes of steps `step_ids` of job `allocation` (their
    environment's ``SLURM_JOB_ID`` and ``SLURM_STEP_ID``); [] without /proc."""
    if not step_ids:
        return []
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    job, steps = allocation.encode(), {str(i).encode() for i in step_ids}
    found = []
    for pid in pids:
        env = _environment(pid)
        if env.get(b"SLURM_JOB_ID") == job and env.get(b"SLURM_STEP_ID") in steps:
            found.append(int(pid))
    return found


def kill_tasks(allocation: str, step_ids: Collection[int]) -> list[int]:
    """SIGKILL this node's tasks of the steps (`step_tasks`), waiting up to `GONE_WAIT`
    s for them to be gone; the pids signalled."""
    pids = step_tasks(allocation, step_ids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # (ended meanwhile)
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GONE_WAIT
    while time.monotonic() < deadline and step_tasks(allocation, step_ids):
        time.sleep(0.05)
    return pids
