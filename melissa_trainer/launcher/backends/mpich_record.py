"""The record of a backend's MPICH segments (`mpich_segments`) on this node, for the
next run of its study to remove what the jobs of a trainer killed with SIGKILL left.

A trainer killed with SIGKILL removes nothing, and its jobs die with it (their mpiexec
gets SIGTERM, its parent-death signal, and ends the ranks before ``MPI_Finalize``):
their files stay. So the backend keeps, in a file of /dev/shm named after the study and
the user, the segments its running jobs were seen to map and, for each job not looked
at yet (`mpich_segments.LOOKS_AT`: the first look comes 0.5 s after the launch), the
time of its launch, written before the job is started: a job cannot make a file that
no record covers. The next `begin` of the study removes the listed segments that are
still the same files and that nobody holds, and sweeps for the launches
(`mpich_segments.orphans`): the MPICH files of ours modified since the earliest of
them that no live process holds open or maps. Such a file has lost every rank of its
job (MPICH's creator keeps its descriptor until it exits): nobody can use it again,
whichever job made it; one that a live program holds is never removed, nor another
user's.

The file format, one line each: ``PATH MAJOR:MINOR INODE`` for a segment, ``launch N
NANOSECONDS`` for a launch (the wall clock; earlier versions skip such lines).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Collection, Iterable

from melissa_trainer.launcher.backends import mpich_segments as shm
from melissa_trainer.launcher.backends.file_holders import holders
from melissa_trainer.launcher.backends.mpich_removal import Segment, remove_segments
from melissa_trainer.launcher.backends.mpich_segments import Listing, is_segment, listing, orphans
from melissa_trainer.launcher.log_lines import warn

__all__ = ["LAUNCH_SLACK", "SegmentRecord"]

logger = logging.getLogger("melissa_trainer.launcher")

#: seconds before a recorded launch from which a file counts as made since it: a file's
#: times come from the kernel's coarse clock, which lags `time.time_ns` by up to a tick
LAUNCH_SLACK = 1.0


class SegmentRecord:
    """The segments seen of a backend's running jobs, and the launches of those not seen
    yet, kept in a file of /dev/shm named after the study and the user (this node's,
    gone with the segments at a reboot), so that the next run of the study on this node
    removes what the jobs of a trainer killed with SIGKILL left (`begin`: nobody else
    could; the module docstring). Inactive until `begin`.

    Each change rewrites the file (a launch, a job's first look that finds its
    segments, its end); a backend whose jobs all ended leaves no file."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.segments: dict[str, Segment] = {}
        #: launches whose job has no segment listed yet: number -> wall clock (ns)
        self.launches: dict[int, int] = {}
        self._launched = 0  # launches numbered so far
        self._written = ""

    def begin(self, study: str) -> list[str]:
        """Record for `study` (`study_id`) from now on; first remove the segments that an
        earlier run's file lists, are still the same files (inode) and that no live
        process holds (those held stay listed), then, if it lists launches, the orphans
        (`mpich_segments.orphans`) modified since the earliest of them. Returns the
        paths removed."""
        self.path = f"{shm.SHM_DIR}melissa_trainer_{study}_{os.geteuid()}.segments"
        left, launches = _read_record(self.path)
        self._written = "?"  # (rewritten below, whatever it held)
        busy: Collection[str] | None = holders([s.path for s in left]) if left else set()
        if busy is None:  # (no /proc: nothing known to be free)
            busy = {s.path for s in left}
        removed = remove_segments(s for s in left if s.path not in busy)
        self.segments = {s.path: s for s in left if s.path in busy}
        if launches:  # jobs killed before their first look: their files are on no list
            since = min(launches) - int(LAUNCH_SLACK * 1e9)
            removed += remove_segments(orphans(_older(since)))
        if removed:  # a warning: rare (a crash left them) and worth seeing on the console
            warn(
                logger,
                f"removed {len(removed)} MPI shared-memory file(s) in {shm.SHM_DIR} left by "
                "the jobs of an earlier run of this study (a trainer killed before it could "
                "remove them)",
            )
        self.update()
        return removed

    def launching(self) -> int | None:
        """Note a launch now, before the job is started (it cannot make a file before the
        record says so); its number, for `update`'s `done` once the job's segments are
        listed or it has ended. None while inactive (before `begin`)."""
        if self.path is None:
            return None
        self._launched += 1
        self.launches[self._launched] = time.time_ns()
        self.update()
        return self._launched

    def update(
        self,
        add: Iterable[Segment] = (),
        remove: Iterable[Segment] = (),
        done: int | None = None,
    ) -> None:
        """Add and remove segments, drop launch `done`; rewrite the file if active and
        changed (no file when nothing is left). A file that cannot be written is said
        in a warning, once."""
        self.segments.update((s.path, s) for s in add)
        for segment in remove:
            self.segments.pop(segment.path, None)
        if done is not None:
            self.launches.pop(done, None)
        text = "".join(f"{s.path} {s.dev[0]}:{s.dev[1]} {s.ino}\n" for s in self.segments.values())
        text += "".join(f"launch {n} {at}\n" for n, at in self.launches.items())
        if self.path is None or text == self._written:
            return
        try:
            if text:
                with open(self.path + ".tmp", "w") as file:
                    file.write(text)
                os.replace(self.path + ".tmp", self.path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        except OSError as exc:
            warn(
                logger,
                f"cannot keep the record of MPI segments {self.path} ({exc}): a trainer "
                "killed with SIGKILL leaves its jobs' segments for you to remove",
            )
            self.path = None
            return
        self._written = text


def _read_record(path: str) -> tuple[list[Segment], list[int]]:
    """The segments and the launch times (ns) that a `SegmentRecord` file lists ([] if
    there is none; a line that is neither is skipped: nothing removed on a guess)."""
    try:
        with open(path) as file:
            lines = file.read().splitlines()
    except OSError:
        return [], []
    segments, launches = [], []
    for line in lines:
        try:
            name, dev, ino = line.rsplit(" ", 2)
            if name == "launch":
                launches.append(int(ino))
                continue
            major, minor = (int(part) for part in dev.split(":"))
            segment = Segment(name, (major, minor), int(ino))
        except ValueError:
            continue
        if is_segment(name):
            segments.append(segment)
    return segments, launches


def _older(since: int) -> Listing:
    """MPICH's files in /dev/shm last modified before `since` (ns, the wall clock): not
    made by a job launched since (``touch -d`` can age a file: then it is left)."""
    old: Listing = {}
    for name, ino in listing().items():
        with contextlib.suppress(OSError):  # (gone meanwhile: nothing to remove)
            if os.stat(shm.SHM_DIR + name).st_mtime_ns < since:
                old[name] = ino
    return old
