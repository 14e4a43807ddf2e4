"""MPICH's shared-memory segments of an ``mpiexec`` job: found while its ranks run,
removed once the job has ended.

MPICH (ch4, 5.0.x: the ``mpich`` wheel) gives the ranks of a job on one node a file in
/dev/shm, ``mpich_shm_<hash>_<node>`` (and ``mpich_vci_<hash>_<node>`` with several
VCIs), created in ``MPI_Init`` (by a 1-rank job too) and unlinked in ``MPI_Finalize``
only. A rank that ends without ``MPI_Finalize`` leaves it: SIGTERM's default action
(what hydra forwards when mpiexec is terminated), SIGKILL, a crash, ``MPI_Abort``.
Hydra does not remove it, and /dev/shm is a tmpfs: each such job keeps about 1 MB per
rank of the node's memory until someone deletes the file or the node reboots
(tests/launcher/test_mpich_shm.py: every stop path left its job's file before
`MpiexecBackend` removed them).

The ``<hash>`` is MPICH's hash of hydra's name for the job's key-value space, which
holds a random number and the host's name: nobody outside the job can compute it. So
the names are read from the ranks themselves: `mapped_segments` reads which of those
files the ranks have mapped (/proc/PID/maps, with the file's device and inode), and
`remove_segments` unlinks each one after the job has ended, only if the file of that
name is still the one the ranks mapped (same device and inode): never another job's,
even one whose name happens to be the same.

A job that ends before anything was found (a rank that crashes, calls ``MPI_Abort`` or
``exit`` right after ``MPI_Init``: the usual deterministic failure, repeated by each
restart; one killed inside ``MPI_Init``) is swept instead (`orphans`): the MPICH files
made since its launch (and, after a look that found none, not held then by a live
process: another job's, `SegmentWatch.look`), that are ours (owner) and that no live
process maps or holds open are removed; those still held then (ranks that hydra kills
after mpiexec has ended, slow to end on a loaded machine) are looked at again later
(`SegmentWatch.retry`; at the last, also those held only by processes carrying the
job's mark: its own, left behind). MPICH's creator of the file (``MPL_initshm_open``,
5.0.x) keeps its descriptor open until it exits, so a file that no process holds has
lost every rank of its job: nobody can use it again, whichever job made it (another
of ours that also failed early is cleaned too; a live one never is).
A trainer killed with SIGKILL removes nothing: `mpich_record.SegmentRecord` lists what
its running jobs were seen to hold, and the launches of those not looked at yet, for the
next run of its study on this node to remove.

Limits: Linux only (nothing found elsewhere); the ranks on this machine only (those an
``mpiexec -hosts`` started on other nodes are out of reach, as are those of Slurm's
jobs and steps there: `slurm.segments`, `slurm.steps` sweep this node's). The sweep
sees the processes this /proc shows: a process of another PID namespace sharing this
/dev/shm (a container with the host's IPC but not its PIDs) is not seen, and a file it
holds could be taken for an orphan; so could one of a process we may not read (not
dumpable, or more privileged than us): MPI ranks are neither.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.file_holders import dying, holders, wait_gone
from melissa_trainer.launcher.backends.mpich_removal import Segment, remove_segments, still_free

if TYPE_CHECKING:  # (mpich_record imports this module)
    from melissa_trainer.launcher.backends.mpich_record import SegmentRecord

__all__ = [
    "LOOKS_AT",
    "Listing",
    "SegmentWatch",
    "is_segment",
    "kvs_hash",
    "kvs_segments",
    "listing",
    "mapped_segments",
    "orphans",
    "sweep",
]

logger = logging.getLogger("melissa_trainer.launcher")

#: where MPICH's POSIX shared memory lives (``shm_open`` on Linux)
SHM_DIR = "/dev/shm/"
#: the prefixes of MPICH's per-job segments (`MPIDI_POSIX_comm_bootstrap`)
PREFIXES = ("mpich_shm_", "mpich_vci_")
#: seconds after its launch at which a running job's processes are read for their
#: segments, until some are found: MPI_Init is usually done within the first two, and a
#: job with none by the last (no MPI, another MPI) costs no more reads
LOOKS_AT = (0.5, 1.5, 4.0, 10.0, 30.0)

#: seconds `orphans` waits for dying processes to let go of a file
DYING_WAIT = 1.0
#: seconds from a job's end to the first `SegmentWatch.retry` of the files its sweep
#: found held, then between the next ones: hydra's SIGKILL can reach the ranks after
#: mpiexec has ended, and a loaded machine can take seconds to end them
RETRY_AFTER = (0.5, 1.5, 3.0, 10.0, 45.0)
#: MPICH's files in /dev/shm at one moment: name -> inode
Listing = dict[str, int]


def mapped_segments(pids: Iterable[int]) -> list[Segment]:
    """MPICH's segments (module docstring) that processes `pids` have mapped or hold open
    (a rank inside ``MPI_Init``, between its ``shm_open`` and its ``mmap``), each once;
    [] for processes gone or unreadable (not Linux, another user's)."""
    found: dict[str, Segment] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                lines = [line for line in maps if SHM_DIR + "mpich_" in line]
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # the process ended meanwhile, or no /proc
            continue
        for line in lines:
            segment = _parse(line)
            if segment is not None:
                found.setdefault(segment.path, segment)
        for fd in fds:
            with contextlib.suppress(OSError):  # closed meanwhile
                path = os.readlink(f"/proc/{pid}/fd/{fd}")
                if is_segment(path) and path not in found:
                    stat = os.stat(f"/proc/{pid}/fd/{fd}")  # (the open file itself)
                    dev = (os.major(stat.st_dev), os.minor(stat.st_dev))
                    found[path] = Segment(path, dev, stat.st_ino)
    return list(found.values())


def _parse(line: str) -> Segment | None:
    """The segment of one line of /proc/PID/maps (``start-end perms offset major:minor
    inode path``), or None for another file or one already unlinked."""
    fields = line.rstrip("\n").split(maxsplit=5)
    if len(fields) < 6:
        return None
    path = fields[5]
    if not is_segment(path):
        return None
    try:
        major, minor = (int(part, 16) for part in fields[3].split(":"))
        return Segment(path, (major, minor), int(fields[4]))
    except ValueError:
        return None


def is_segment(path: str) -> bool:
    """`path` names an MPICH segment (an unlinked file's path in /proc ends with
    " (deleted)": gone already, nothing to remove)."""
    name = path[len(SHM_DIR) :]
    return path.startswith(SHM_DIR) and name.startswith(PREFIXES) and not {"/", " "} & set(name)


def listing() -> Listing:
    """MPICH's files (`PREFIXES`) in /dev/shm now; {} without /dev/shm."""
    try:
        with os.scandir(SHM_DIR) as entries:
            return {e.name: e.inode() for e in entries if e.name.startswith(PREFIXES)}
    except OSError:
        return {}


def kvs_hash(kvs: str) -> str:
    """The ``<hash>`` of MPICH's names for the segments of the PMI key-value space `kvs`
    (``srun --mpi=pmi2`` calls a step's ``<job id>.<step id>``): its 32-bit FNV-1a, hex."""
    value = 2166136261
    for byte in kvs.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return f"{value:x}"


def kvs_segments(spaces: Iterable[str]) -> list[str]:
    """The names of MPICH's files in /dev/shm now that belong to the key-value spaces
    `spaces`, on any node index (``<prefix><hash>_<node>``): a Slurm step's, known by its
    id. Whose they are, and whether a live process holds them, is for `sweep` to say."""
    hashes = {kvs_hash(kvs) for kvs in spaces}
    size = len(PREFIXES[0])  # (both prefixes are as long)
    return [name for name in listing() if name[size:].rpartition("_")[0] in hashes]


def orphans(before: Listing, only: Collection[str] | None = None) -> list[Segment]:
    """MPICH's files in /dev/shm that are not in `before` (the same name and inode), are
    ours (owner) and that no live process holds (`file_holders.holders`); among the
    names `only` if given. A file held only by dying processes (a job's ranks that
    hydra has just SIGKILLed, which can outlive mpiexec by a moment) is an orphan once
    they are gone (waited for up to `DYING_WAIT`). [] without /proc."""
    return sweep(before, only)[0]


def sweep(
    before: Listing, only: Collection[str] | None = None
) -> tuple[list[Segment], list[Segment]]:
    """`orphans`, and the other candidates: those still held (by a live job, or by
    processes still ending: on a loaded machine a SIGKILLed rank can take seconds)."""
    new = [
        name
        for name, ino in listing().items()
        if before.get(name) != ino and (only is None or name in only)
    ]
    candidates: dict[str, Segment] = {}
    for name in new:
        try:
            stat = os.stat(SHM_DIR + name)
        except OSError:  # gone meanwhile
            continue
        if stat.st_uid == os.geteuid():
            dev = (os.major(stat.st_dev), os.minor(stat.st_dev))
            candidates[SHM_DIR + name] = Segment(SHM_DIR + name, dev, stat.st_ino)
    busy = holders(candidates) if candidates else {}
    if busy is None:
        return [], []
    ending = [path for path, pids in busy.items() if all(dying(pid) for pid in pids)]
    if ending:
        wait_gone({pid for path in ending for pid in busy[path]}, DYING_WAIT)
        still = holders(ending)
        for path in ending:
            if still is not None and path not in still:
                del busy[path]
    free = [segment for path, segment in candidates.items() if path not in busy]
    return free, [segment for path, segment in candidates.items() if path in busy]


def _others(before: Listing, now: Listing) -> Listing:
    """The files of `now` that a look which found none of its job's takes for others':
    those of `before`, and those made since that a live process holds (not only dying
    ones). A file that nobody holds may be the job's own, its ranks dead before the look
    (a rank killed, hydra ending the others, mpiexec still running: the C solver of
    tests/examples/test_c_examples.py that SIGKILLs itself about when the first look
    comes left its file so, 1 run in 2 to 10): it stays a candidate, removed by the
    sweep if nobody holds it then. All of `now` without /proc."""
    made = {SHM_DIR + name: name for name, ino in now.items() if before.get(name) != ino}
    busy = holders(made) if made else {}
    if busy is None:
        return now
    held = {made[path] for path, pids in busy.items() if not all(dying(p) for p in pids)}
    return {name: ino for name, ino in now.items() if before.get(name) == ino or name in held}


class SegmentWatch:
    """The segments of one job: read from its processes while it runs (`due`, then
    `look`, at `LOOKS_AT`: a job whose rank crashes leaves no process to read them from)
    and when it is killed (`add`); unlinked by `remove` once it has ended, or, none
    found, swept (`orphans` since `before`, the `listing` taken before its launch,
    narrowed by its looks that found none, among the names `only` if given; no sweep
    without `before`). `launch`: the job's entry in `record` (`SegmentRecord.launching`),
    dropped once segments are found or the job has ended. `mark`: ``NAME=VALUE`` in the
    environment of each of the job's processes (`retry`)."""

    def __init__(
        self,
        before: Listing | None = None,
        only: Collection[str] | None = None,
        record: SegmentRecord | None = None,
        launch: int | None = None,
        mark: str | None = None,
    ) -> None:
        self.segments: list[Segment] = []
        self.launched = time.monotonic()
        self.looks = 0  # how many of `LOOKS_AT` were done
        self.before, self.only, self.launch, self.mark = before, only, launch, mark
        self.record = record  # where the segments found are kept until removed
        #: what the sweep found still held at the job's end (`retry`), and when to retry
        self.pending: list[Segment] = []
        self.retries, self.retry_at = 0, 0.0

    @classmethod
    def singleton(cls, pid: int, before: Listing, record: SegmentRecord) -> SegmentWatch:
        """The watch of an MPI singleton `pid` (mpi4py without mpiexec), whose segment is
        named after its pid: the only names its sweep may remove."""
        only = [f"{prefix}{pid:x}_0" for prefix in PREFIXES]
        return cls(before, only, record)

    @classmethod
    def off(cls) -> SegmentWatch:
        """A watch that never looks nor sweeps (a process that is not a rank: mpiexec)."""
        watch = cls()
        watch.looks = len(LOOKS_AT)
        return watch

    def due(self) -> bool:
        """None found yet, and the next of `LOOKS_AT` has come."""
        if self.segments or self.looks >= len(LOOKS_AT):
            return False
        return time.monotonic() - self.launched >= LOOKS_AT[self.looks]

    def look(self, pids: Iterable[int], listed: Listing | None = None) -> None:
        """The look that was `due`: read what `pids` map or hold. None yet: the files of
        `listed` that a live process holds are not the job's, and a sweep will leave
        them (`before`, `_others`). `listed`: MPICH's files listed before `pids` were
        found (before the process table they come from was read, and after the launch);
        default: listed now, for `pids` known beforehand (a singleton's own pid).

        Why before: the rank that made a file holds it open until it exits (module
        docstring), so a file of the job listed before the table has a rank that the
        table shows, whose read finds it. A listing taken after the table can hold the
        file of ranks started in between (hydra starts them late on a loaded machine;
        `MpiexecBackend` shares a table between the jobs that look in one poll): their
        file was taken for another job's and the job's sweep left it."""
        self.looks += 1
        now = None if self.before is None else listing() if listed is None else listed
        self.add(pids)
        if not self.segments and now is not None and self.before is not None:
            self.before = _others(self.before, now)

    def add(self, pids: Iterable[int]) -> None:
        """Add what `pids` map (before a kill: the job's processes, still alive)."""
        known = {segment.path for segment in self.segments}
        found = [s for s in mapped_segments(pids) if s.path not in known]
        self.segments += found
        if found and self.record is not None:  # (listed now: the launch's entry is done)
            self.record.update(add=found, done=self.launch)
            self.launch = None

    def remove(self, job: str) -> list[str]:
        """Unlink the ended job `job`'s segments that it left (`remove_segments`), or,
        none found, the orphans made since its launch (`sweep`); the candidates still
        held then are `pending`, for `retry`."""
        segments, self.segments = self.segments, []
        before, self.before = self.before, None
        if segments and self.record is not None:
            self.record.update(remove=segments)  # (removed or left, not the job's now)
        if not segments and before is not None:
            segments, self.pending = sweep(before, self.only)
            self.retries, self.retry_at = 0, time.monotonic() + RETRY_AFTER[0]
        return self._removed(job, remove_segments(segments))

    def retry(self, job: str, now: bool = False, last: bool = False) -> bool:
        """Once its time has come (`RETRY_AFTER`), or `now` (not counted among them):
        unlink the `pending` files (`remove`) that nobody holds now. True when none is
        left pending. At the last (`RETRY_AFTER`'s, or `last`: the backend's close) a
        file that only processes carrying the job's `mark` hold (a rank or a rank's child
        left behind) is unlinked too: nobody can join the ended job, its holders keep
        their mappings, the memory is freed when they end. One that another live process
        holds is another job's, left; the launch leaves the record (a study ended
        normally must leave none)."""
        if self.pending and (now or last or time.monotonic() >= self.retry_at):
            if not now and not last:
                self.retries += 1
                last = self.retries >= len(RETRY_AFTER)
                if not last:
                    self.retry_at = time.monotonic() + RETRY_AFTER[self.retries]
            free, self.pending = still_free(self.pending, self.mark if last else None)
            if last:
                self.pending = []  # (held by another job's live processes: not ours)
            self._removed(job, remove_segments(free))
        return not self.pending

    def _removed(self, job: str, removed: list[str]) -> list[str]:
        if removed:
            logger.debug("%s ended before MPI_Finalize: removed %s", job, ", ".join(removed))
        if not self.pending and self.record is not None and self.launch is not None:
            self.record.update(done=self.launch)  # (swept: nothing of it left to find)
            self.launch = None
        return removed
