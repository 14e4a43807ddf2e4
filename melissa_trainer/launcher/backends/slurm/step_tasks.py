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
sets them for every task, and a task's children inherit them; a step whose id squeue
never listed, by its name, ``SLURM_JOB_NAME``, which srun sets from ``--job-name``):
SIGTERM and the stop's
grace first (`end_tasks`: a solver writes its last state, as a scancel --signal=TERM
would have let it), then SIGKILL for what is left. Tasks on other nodes are out of
reach: they run on until the controller answers again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection

from melissa_trainer.launcher.backends.slurm.segments import job_pids

__all__ = [
    "GONE_WAIT",
    "elsewhere",
    "end_tasks",
    "kill_tasks",
    "mute_elsewhere",
    "one_node",
    "step_tasks",
]

#: seconds to wait for SIGKILLed tasks to be gone (a process in uninterruptible I/O)
GONE_WAIT = 2.0
_STEP_ID = b"SLURM_STEP_ID="
#: a task's step name: srun sets it from its ``--job-name`` (seen on the test cluster,
#: Slurm 22.05, with ``--export=ALL`` and ``--export=NONE`` alike)
_JOB_NAME = b"SLURM_JOB_NAME="


def _step_of(pid: int) -> tuple[bytes | None, bytes | None]:
    """Process `pid`'s ``SLURM_STEP_ID`` and ``SLURM_JOB_NAME`` (None for one it has
    not, or both when it ended or is unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = environ.read().split(b"\0")
    except OSError:
        return None, None
    step = next((v[len(_STEP_ID) :] for v in variables if v.startswith(_STEP_ID)), None)
    name = next((v[len(_JOB_NAME) :] for v in variables if v.startswith(_JOB_NAME)), None)
    return step, name


def step_tasks(
    allocation: str, step_ids: Collection[int], names: Collection[str] = ()
) -> list[int]:
    """The pids of this node's processes of ours of steps `step_ids` of job `allocation`,
    or of its steps named one of `names` (a step whose id was never listed): those of
    the job (`segments.job_pids`, its environment's ``SLURM_JOB_ID``) whose
    ``SLURM_STEP_ID`` is one of the ids or ``SLURM_JOB_NAME`` one of the names (the
    trainer's own is its allocation's name, never a step's); [] without /proc."""
    if not step_ids and not names:
        return []
    steps = {str(i).encode() for i in step_ids}
    called = {os.fsencode(name) for name in names}
    found = []
    for pid in job_pids([allocation]).get(allocation, []):
        step, name = _step_of(pid)
        if pid != os.getpid() and (step in steps or name in called):
            found.append(pid)
    return found


def _signal(pids: list[int], number: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # (ended meanwhile)
            os.kill(pid, number)


def _wait_gone(
    allocation: str, step_ids: Collection[int], names: Collection[str], wait: float
) -> None:
    """Up to `wait` s for this node's tasks of the steps to be gone (reaped: slurmstepd
    reaps its tasks without the controller)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and step_tasks(allocation, step_ids, names):
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0.0)))


def kill_tasks(
    allocation: str, step_ids: Collection[int], names: Collection[str] = ()
) -> list[int]:
    """SIGKILL this node's tasks of the steps (`step_tasks`: by id, or by name for
    `names`), waiting up to `GONE_WAIT` s for them to be gone; the pids signalled."""
    pids = step_tasks(allocation, step_ids, names)
    _signal(pids, signal.SIGKILL)
    if pids:
        _wait_gone(allocation, step_ids, names, GONE_WAIT)
    return pids


def end_tasks(
    allocation: str, step_ids: Collection[int], grace: float, names: Collection[str] = ()
) -> tuple[list[int], list[int]]:
    """SIGTERM this node's tasks of the steps (`step_tasks`: by id, or by name for
    `names`), wait up to `grace` s for them to be gone, then `kill_tasks` what is left:
    at most `grace` + `GONE_WAIT` s (less once none is left). (The pids SIGTERMed, those
    SIGKILLed.)"""
    termed = step_tasks(allocation, step_ids, names)
    _signal(termed, signal.SIGTERM)
    if termed:
        _wait_gone(allocation, step_ids, names, max(grace, 0.0))
    return termed, kill_tasks(allocation, step_ids, names)


def one_node() -> bool:
    """Whether the allocation has one node (the trainer's ``SLURM_JOB_NUM_NODES``, set
    by salloc and sbatch): then this node's tasks of a step are all of them."""
    return os.environ.get("SLURM_JOB_NUM_NODES", "").strip() == "1"


def elsewhere() -> str:
    """What a stop's warning says of the steps' tasks on other nodes, which it cannot
    reach: from the trainer's ``SLURM_JOB_NUM_NODES`` (set by salloc and sbatch for the
    allocation), there are none in a one-node allocation."""
    nodes = os.environ.get("SLURM_JOB_NUM_NODES", "").strip()
    if one_node():
        return "the allocation has one node (SLURM_JOB_NUM_NODES=1): no task runs elsewhere"
    return (
        f"those on the allocation's other nodes (SLURM_JOB_NUM_NODES={nodes or 'unset'}) "
        "run until the controller answers again (it then ends them) or the allocation ends"
    )


def mute_elsewhere(none_here: Collection[str]) -> str:
    """What a stop's warning says of the steps' tasks on other nodes when the controller
    answers but the steps' daemons (slurmstepd) did not answer their scancel
    --signal=TERM (`step_stop.Stopped.mute`): `none_here` names the steps of which this
    node had no task (they ran elsewhere only). Those tasks are out of reach: no SIGTERM,
    no grace; they end when Slurm's kill (the cancel by name) reaches them or with their
    node (a vanished node's, when Slurm marks it down). One node: none runs elsewhere."""
    if one_node():
        return "the allocation has one node (SLURM_JOB_NUM_NODES=1): no task runs elsewhere"
    nodes = os.environ.get("SLURM_JOB_NUM_NODES", "").strip() or "unset"
    which = (
        f"steps {sorted(none_here)} had no task on this node; their tasks"
        if none_here
        else "the steps' tasks"
    )
    return (
        f"{which} on the allocation's other nodes (SLURM_JOB_NUM_NODES={nodes}) could not "
        "be reached (no SIGTERM, no grace: their daemons do not answer): they end when "
        "Slurm's kill reaches them (the cancel by name) or with their node"
    )
