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

Limits: Linux only (nothing found elsewhere); the ranks on this machine only (those an
``mpiexec -hosts`` started on other nodes are out of reach, as are Slurm's); a rank
killed between its ``shm_open`` and its ``mmap`` (inside ``MPI_Init``) has mapped
nothing yet, and its file stays.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["LOOKS_AT", "Segment", "SegmentWatch", "mapped_segments", "remove_segments"]

logger = logging.getLogger("melissa_trainer.launcher")

#: where MPICH's POSIX shared memory lives (``shm_open`` on Linux)
SHM_DIR = "/dev/shm/"
#: the prefixes of MPICH's per-job segments (`MPIDI_POSIX_comm_bootstrap`)
PREFIXES = ("mpich_shm_", "mpich_vci_")
#: seconds after its launch at which a running job's processes are read for their
#: segments, until some are found: MPI_Init is usually done within the first two, and a
#: job with none by the last (no MPI, another MPI) costs no more reads
LOOKS_AT = (0.5, 1.5, 4.0, 10.0, 30.0)


class Segment(NamedTuple):
    """A file a rank mapped: its path, and the device and inode that make it that file
    (a later file of the same name is another one)."""

    path: str
    dev: tuple[int, int]  # (major, minor), as /proc/PID/maps says
    ino: int


def mapped_segments(pids: Iterable[int]) -> list[Segment]:
    """MPICH's segments (module docstring) that processes `pids` have mapped, each once;
    [] for processes gone or unreadable (not Linux, another user's)."""
    found: dict[str, Segment] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                lines = [line for line in maps if SHM_DIR + "mpich_" in line]
        except OSError:  # the process ended meanwhile, or no /proc
            continue
        for line in lines:
            segment = _parse(line)
            if segment is not None:
                found.setdefault(segment.path, segment)
    return list(found.values())


def _parse(line: str) -> Segment | None:
    """The segment of one line of /proc/PID/maps (``start-end perms offset major:minor
    inode path``), or None for another file or one already unlinked."""
    fields = line.rstrip("\n").split(maxsplit=5)
    if len(fields) < 6:
        return None
    path = fields[5]
    if not path.startswith(SHM_DIR):
        return None
    name = path[len(SHM_DIR) :]
    # an unlinked file's path ends with " (deleted)": gone already, nothing to remove
    if not name.startswith(PREFIXES) or "/" in name or " " in name:
        return None
    try:
        major, minor = (int(part, 16) for part in fields[3].split(":"))
        return Segment(path, (major, minor), int(fields[4]))
    except ValueError:
        return None


def remove_segments(segments: Iterable[Segment]) -> list[str]:
    """Unlink each of `segments` that still is the file its job mapped (same device and
    inode); returns the paths removed. A file already gone (the job's ``MPI_Finalize``
    removed it) or replaced is left alone; one that cannot be removed is said in a
    warning."""
    removed = []
    for segment in segments:
        try:
            stat = os.stat(segment.path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("cannot check MPI segment %s of a killed job: %s", segment.path, exc)
            continue
        if (os.major(stat.st_dev), os.minor(stat.st_dev)) != segment.dev:
            continue
        if stat.st_ino != segment.ino:
            continue
        try:
            os.unlink(segment.path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning(
                "cannot remove MPI segment %s of an ended job (%s): it keeps %d bytes of "
                "the node's memory until deleted",
                segment.path,
                exc,
                stat.st_size,
            )
            continue
        removed.append(segment.path)
    return removed


class SegmentWatch:
    """The segments of one job: read from its processes while it runs (`due`, then
    `look`, at `LOOKS_AT`: a job whose rank crashes leaves no process to read them from)
    and when it is killed (`add`); unlinked by `remove` once it has ended."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.launched = time.monotonic()
        self.looks = 0  # how many of `LOOKS_AT` were done

    def due(self) -> bool:
        """None found yet, and the next of `LOOKS_AT` has come."""
        if self.segments or self.looks >= len(LOOKS_AT):
            return False
        return time.monotonic() - self.launched >= LOOKS_AT[self.looks]

    def look(self, pids: Iterable[int]) -> None:
        """The look that was `due`: read what `pids` map."""
        self.looks += 1
        self.add(pids)

    def add(self, pids: Iterable[int]) -> None:
        """Add what `pids` map (before a kill: the job's processes, still alive)."""
        known = {segment.path for segment in self.segments}
        self.segments += [s for s in mapped_segments(pids) if s.path not in known]

    def remove(self, job: str) -> list[str]:
        """Unlink the ended job `job`'s segments that it left (`remove_segments`)."""
        segments, self.segments = self.segments, []
        removed = remove_segments(segments)
        if removed:
            logger.debug("%s ended before MPI_Finalize: removed %s", job, ", ".join(removed))
        return removed
