"""The removal of MPICH's segment files (`mpich_segments`' module docstring says whose
and when): the file a rank mapped (`Segment`: its path, device and inode), its unlink
only while it still is that file (`remove_segments`), and which files no live process
holds any more (`still_free`).

Contract: never removes a file other than the one recorded (a later file of the same
name is another's), nor one a live process holds unless only processes marked with the
job's own mark do; never raises for a file gone or that cannot be removed (a warning
says the latter, with the memory it keeps). `Segment` and `remove_segments` still
import from `melissa_trainer.launcher.backends.mpich_segments`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import NamedTuple

from melissa_trainer.launcher.backends.file_holders import released

__all__ = ["Segment", "remove_segments", "still_free"]

logger = logging.getLogger("melissa_trainer.launcher")


class Segment(NamedTuple):
    """A file a rank mapped: its path, and the device and inode that make it that file
    (a later file of the same name is another one)."""

    path: str
    dev: tuple[int, int]  # (major, minor), as /proc/PID/maps says
    ino: int


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


def still_free(segments: list[Segment], mark: str | None) -> tuple[list[Segment], list[Segment]]:
    """`segments` that no live process holds now (or only processes marked `mark`:
    `file_holders.released`), and the others (all, without /proc)."""
    free = released([s.path for s in segments], mark)
    if free is None:
        return [], segments
    return [s for s in segments if s.path in free], [s for s in segments if s.path not in free]
