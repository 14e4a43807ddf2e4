"""MPICH's shared-memory segments of the batch jobs that run on this host: found while
their ranks run, removed once the job has ended (`mpich_segments` tells why: a rank
that ends without ``MPI_Finalize`` leaves a file of about 1 MB per rank in /dev/shm, and
under ``srun --mpi=pmi2`` a later job step of the same id attaches to it and fails).

A killed or cancelled job never finalizes: ``scancel`` of a running job, `begin_study`'s
cancel of an earlier run's jobs, the trainer's own cancel when it stops (trial
htrial15: each left a 2 MB ``mpich_shm_*`` file). So, as `MpiexecBackend` does, the
backend reads which segments a job's ranks map: at `mpich_segments.LOOKS_AT` seconds
after squeue first lists the job RUNNING (until some are found), and once more just
before it cancels the job; after squeue says the job ended, it unlinks those that are
still the files the ranks mapped (device and inode) and that no live process holds or
maps (`file_holders.holders`; a dying rank is waited for up to `DYING_WAIT`).

A job's processes are the processes of ours that this host's /proc shows with the job's
``SLURM_JOB_ID`` in their environment (the batch shell, srun, the ranks): the ranks of
a job that runs on this host (a one-node cluster, or a trainer that runs on its jobs'
node). Ranks on other nodes are out of reach: their segments stay (docs/how-to/slurm.md,
"A stale MPICH segment"). What is seen is kept in the study's `SegmentRecord`, so that
the next run of the study on this host removes what the jobs of a trainer killed with
SIGKILL left.

A job that ended before a look found anything (killed or crashed in its first half
second, or scancelled before a poll saw it running) is swept by name instead: under
``srun --mpi=pmi2`` MPICH (5.0.x) names a node's segment after the PMI key-value space,
``<job id>.<step id>``, as ``mpich_shm_<FNV-1a hash, hex>_<node index>``
(`pmi2_names`). The files of those names (steps 0 to `STEPS` - 1, node indices 0 to
`NODES` - 1) that are ours and that no live process holds or maps are removed
(`mpich_segments.orphans`): a file no process holds has lost every rank of its job, and
a later step of that name would attach to it and fail. Another MPI, or another naming,
matches no file: nothing is removed then.

This module uses `mpich_segments` and `file_holders` as they are; `job_pids` and
`pmi2_names` are its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Collection, Iterable

from melissa_trainer.launcher.backends.file_holders import dying, holders, wait_gone
from melissa_trainer.launcher.backends.mpich_record import SegmentRecord
from melissa_trainer.launcher.backends.mpich_removal import remove_segments
from melissa_trainer.launcher.backends.mpich_segments import (
    DYING_WAIT,
    PREFIXES,
    SegmentWatch,
    kvs_hash,
    orphans,
)

__all__ = ["JobSegments", "job_pids", "pmi2_names"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

_JOB_ID = b"SLURM_JOB_ID="
#: job steps swept by name (the batch script's srun is step 0)
STEPS = 4
#: node indices swept by name (this host's index in a job of several nodes)
NODES = 4


def pmi2_names(job_id: str, steps: int = STEPS, nodes: int = NODES) -> list[str]:
    """The names MPICH gives, in /dev/shm, to the segments of job `job_id`'s steps 0 to
    `steps` - 1 under ``srun --mpi=pmi2``, on node indices 0 to `nodes` - 1: its 32-bit
    FNV-1a hash of the key-value space's name ``<job id>.<step id>``."""
    names = []
    for step in range(steps):
        value = kvs_hash(f"{job_id}.{step}")
        names += [f"{prefix}{value}_{node}" for prefix in PREFIXES for node in range(nodes)]
    return names


def job_pids(job_ids: Collection[str]) -> dict[str, list[int]]:
    """The pids of this host's processes of ours whose environment has
    ``SLURM_JOB_ID`` equal to one of `job_ids`, by job id (absent: none seen); {} without
    /proc. Processes that end meanwhile or cannot be read are skipped."""
    wanted = {_JOB_ID + job_id.encode() for job_id in job_ids}
    found: dict[str, list[int]] = {}
    if not wanted:
        return found
    uid = os.geteuid()
    try:
        entries = [e for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        with contextlib.suppress(OSError):  # ended meanwhile, or not ours to read
            if uid != 0 and entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/environ", "rb") as file:
                variables = file.read().split(b"\0")
            for variable in variables:
                if variable in wanted:
                    job_id = variable[len(_JOB_ID) :].decode()
                    found.setdefault(job_id, []).append(int(entry.name))
                    break
    return found


class JobSegments:
    """The segments of one backend's batch jobs (module docstring), by job id. Used
    from the backend's one thread."""

    def __init__(self) -> None:
        self._watches: dict[str, SegmentWatch] = {}
        self._record = SegmentRecord()

    def begin(self, study: str) -> list[str]:
        """Record for `study` from now on; first remove what an earlier run's record lists
        and no live process holds (`SegmentRecord.begin`). Returns the paths removed."""
        return self._record.begin(study)

    def seen(self, job_id: str) -> list[str]:
        """The paths of the segments found so far of job `job_id`, not yet removed."""
        watch = self._watches.get(job_id)
        return [] if watch is None else [segment.path for segment in watch.segments]

    def running(self, job_id: str) -> None:
        """Job `job_id` is listed RUNNING: start its watch (its looks count from now) and
        read its processes if a look is due."""
        watch = self._watches.get(job_id)
        if watch is None:
            watch = self._watches[job_id] = SegmentWatch(record=self._record)
        if watch.due():
            watch.look(job_pids([job_id]).get(job_id, ()))

    def before_kill(self, job_ids: Iterable[str]) -> None:
        """Read the processes of jobs about to be cancelled (alive still) for their
        segments; a job with none on this host adds nothing."""
        job_ids = list(job_ids)
        for job_id, pids in job_pids(job_ids).items():
            watch = self._watches.get(job_id)
            if watch is None:
                watch = self._watches[job_id] = SegmentWatch(record=self._record)
            watch.add(pids)

    def ended(self, job_id: str, job: str) -> list[str]:
        """Job `job_id` (`job`: its name for the log) has ended: unlink the segments its
        ranks were seen to map that no live process holds (those held stay in the
        record, for the study's next run), then sweep its names (`pmi2_names`: those no
        live process holds). Returns the paths removed."""
        watch = self._watches.pop(job_id, None)
        removed = [] if watch is None or not watch.segments else self._seen(watch, job)
        swept = remove_segments(orphans({}, pmi2_names(job_id)))
        if swept:
            logger.debug("%s ended before MPI_Finalize: removed %s", job, ", ".join(swept))
        return removed + swept

    def _seen(self, watch: SegmentWatch, job: str) -> list[str]:
        """Remove the segments `watch` found that no live process holds."""
        free = self._free([segment.path for segment in watch.segments])
        held = [segment for segment in watch.segments if segment.path not in free]
        if held:
            logger.debug(
                "%s ended; its MPI segments still held by live processes are kept: %s",
                job,
                ", ".join(segment.path for segment in held),
            )
        watch.segments = [segment for segment in watch.segments if segment.path in free]
        return watch.remove(job)

    @staticmethod
    def _free(paths: list[str]) -> set[str]:
        """Those of `paths` that no live process holds or maps, once the processes that
        are dying have gone (waited for up to DYING_WAIT s); none without /proc."""
        busy = holders(paths)
        if busy is None:
            return set()
        ending = {pid for pids in busy.values() for pid in pids if dying(pid)}
        if ending:
            wait_gone(ending, DYING_WAIT)
            busy = holders(paths)
            if busy is None:
                return set()
        return {path for path in paths if path not in busy}
