"""A rank's heartbeat file, as rank k writes it and rank 0 reads it
(`stream.rank_activity`, whose docstring says why and when): its format
(`write_activity`, `read_activity`), what a read holds (`RankActivity`), and the clearing
of an earlier run's files (`clear_activity_files`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "ACTIVITY_FILE",
    "Firsts",
    "RankActivity",
    "Samples",
    "clear_activity_files",
    "read_activity",
    "write_activity",
]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: rank k's counts: ``{ACTIVITY_FILE}.{k}`` in the rendezvous directory
ACTIVITY_FILE = "activity"
#: simulation id -> (steps received, of which refused for NaN or Inf), as `samples_of`
Samples = Mapping[int, tuple[int, int]]
#: simulation id -> the first time step refused for NaN or Inf (`NonFiniteGuard.first_step`)
Firsts = Mapping[int, int]


class RankActivity(NamedTuple):
    """A rank's file as read (`read_activity`): its messages per simulation, whether
    its receiver waits for room, its steps (received, refused) per simulation, the first
    step it refused of each (those it refused none of: absent), whether it is the rank's
    last write (`ActivityPublisher.stop`)."""

    counts: dict[int, int]
    waiting: bool
    samples: dict[int, tuple[int, int]]
    first_refused: dict[int, int]
    final: bool


def write_activity(
    path: Path,
    run_id: str | None,
    counts: Mapping[int, int],
    waiting: bool,
    samples: Samples | None = None,
    first_refused: Firsts | None = None,
    final: bool = False,
) -> None:
    """Write a rank's `counts` and whether its receiver `waiting` for buffer room to
    `path`, aside then renamed (`rank_activity`'s docstring: the format), with each
    simulation's `samples` (none said: 0 steps) and `first_refused` step (none said:
    ``-``), marked `final` when it is the rank's last write. A simulation of `samples`
    not in `counts` (archived there) is written with messages ``-``: read back, it has
    samples and no count.

    Raises:
        OSError: the file could not be written (the caller says it).
    """
    lines = [f"{run_id or '-'}\t{int(waiting)}" + ("\tfinal" if final else "")]
    got, firsts = samples or {}, first_refused or {}
    for sid, n in counts.items():
        steps, refused = got.get(sid, (0, 0))
        lines.append(f"{sid}\t{n}\t{steps}\t{refused}\t{firsts.get(sid, '-')}")
    for sid in got.keys() - counts.keys():  # (archived there: its heartbeat is over)
        steps, refused = got[sid]
        lines.append(f"{sid}\t-\t{steps}\t{refused}\t{firsts.get(sid, '-')}")
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(aside, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(aside)
        raise


def read_activity(path: Path, run_id: str | None) -> RankActivity | None:
    """A rank's counts, its wait for room and its samples from `path`
    (`write_activity`), or None when the file is another run's, or gone (cleared, not
    written yet).

    Raises:
        ValueError: a line that is not what `write_activity` writes (names the file).
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"{path}: empty (a heartbeat file is written aside then renamed)")
    head = lines[0].split("\t")
    if len(head) not in (2, 3) or head[1] not in ("0", "1") or head[2:] not in ([], ["final"]):
        raise ValueError(f"{path}: first line {lines[0]!r} is not 'run id<TAB>0|1[<TAB>final]'")
    if head[0] != (run_id or "-"):
        return None  # (an earlier run's: not this one's heartbeat)
    counts: dict[int, int] = {}
    samples: dict[int, tuple[int, int]] = {}
    firsts: dict[int, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        first = parts.pop() if len(parts) == 5 else "-"  # (4 fields: an older writer's)
        archived = len(parts) == 4 and parts[1] == "-"  # (no messages: archived there)
        numbers = [p for i, p in enumerate(parts) if not (archived and i == 1)]
        numbers += [] if first == "-" else [first]
        if len(parts) != 4 or not all(p.isdigit() for p in numbers):
            raise ValueError(
                f"{path}: line {number} {line!r} is not "
                "'simulation id<TAB>messages|-<TAB>steps<TAB>refused<TAB>first refused|-'"
            )
        sid, steps, refused = int(parts[0]), int(parts[2]), int(parts[3])
        samples[sid] = (steps, refused)
        if not archived:
            counts[sid] = int(parts[1])
        if first != "-":
            firsts[sid] = int(first)
    return RankActivity(counts, head[1] == "1", samples, firsts, len(head) == 3)


def clear_activity_files(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's heartbeat files (rank 0, before it launches anything:
    the other ranks write theirs once a message came, so after)."""
    for path in Path(directory).glob(f"{ACTIVITY_FILE}.*"):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # (its run id still tells it apart, where there is one)
            logger.debug("removing %s: %s", path, exc)
