"""The MPICH files that ended srun steps left on this node (`StepSweeps`), for
`steps.SrunSteps`.

A step whose ranks end without ``MPI_Finalize`` (killed, crashed) leaves its node's file
in /dev/shm (`mpich_segments`), named after the step's PMI key-value space
``<allocation>.<step id>`` under ``srun --mpi=pmi2``; `steps` learns the step's id from
``squeue --steps``. Once the step has ended, the files of that name on any node index
that are ours and that no live process holds are removed (`mpich_segments.sweep`); those
still held then (ranks that slurmstepd is still ending) are retried by later polls
(`retry`), and once more at the backend's close (`last_retry`). A step that ended before
squeue listed it is swept over the step ids it may have had: above the highest listed
before its launch, up to `SPAN` past the highest listed by its end (any file of this
allocation's steps that is ours and unheld has lost every rank: nobody can use it again).

Used from the backend's one thread.
"""

from __future__ import annotations

from melissa_trainer.launcher.backends.mpich_segments import SegmentWatch, kvs_segments
from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle

__all__ = ["SPAN", "StepSweeps"]

#: step ids swept past the highest listed, for a step whose id was never listed
SPAN = 16


class StepSweeps:
    """The sweeps of the ended steps of the allocation `allocation` (its job id)."""

    def __init__(self, allocation: str) -> None:
        self._allocation = allocation
        #: sweeps of ended steps that found files still held, and the steps' names
        self._pending: list[tuple[SegmentWatch, str]] = []

    def sweep(self, step: SrunHandle, top: int) -> None:
        """Remove the MPICH files that ended `step` left on this node (module docstring;
        `top`: the highest step id of the allocation listed so far); keep those still
        held for `retry`."""
        if step.step_id is None:  # ended before squeue listed it: the ids it may have had
            numbers = range(step.floor, top + 1 + SPAN)
        else:
            numbers = range(step.step_id, step.step_id + 1)
        names = kvs_segments(f"{self._allocation}.{number}" for number in numbers)
        if names:
            watch = SegmentWatch({}, names)
            watch.remove(step.step_name)
            if watch.pending:
                self._pending.append((watch, step.step_name))

    def retry(self) -> None:
        """The retries that are due of the sweeps that found files still held."""
        self._pending = [(w, name) for w, name in self._pending if not w.retry(name)]

    def last_retry(self) -> None:
        """Retry every sweep that found files still held, due or not, and forget them
        (the backend's close: no poll comes after it)."""
        for watch, name in self._pending:
            watch.retry(name, now=True)
        self._pending.clear()
