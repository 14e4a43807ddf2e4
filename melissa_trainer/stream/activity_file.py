"""A rank's heartbeat file, as rank k writes it and rank 0 reads it
(`stream.rank_activity`, whose docstring says why and when): its format
(`write_activity`, `read_activity`), what a read holds (`RankActivity`), and the clearing
of an earlier run's files (`clear_activity_files`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

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
    archived = got.keys() - counts.keys()  # (archived there: its heartbeat is over)
    for sid in archived & firsts.keys():
        steps, refused = got[sid]
        lines.append(f"{sid}\t-\t{steps}\t{refused}\t{firsts[sid]}")
    # (the others, said as runs of ids: O(study) in the last write, `rank_activity`)
    lines.extend(_run_lines(sorted(archived - firsts.keys()), got))
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
        if "+" in parts[0]:  # (a run of archived ids: `_run_lines`)
            samples.update(_read_run(parts, path, number))
            continue
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


def _run_lines(ids: list[int], got: Samples) -> list[str]:
    """The lines of the archived simulations `ids` (sorted), none refused first: one
    per run of consecutive ids, ``{first id}+{n}\t-\t{steps}\t{refused}\t-``, where
    steps and refused are each a comma-separated list of ``{value}`` or
    ``{value}*{repeats}``, n values in all, in id order. Archived ids are mostly runs
    (ids are given in order, most simulations finish), and their counts mostly repeat
    (or alternate, under routing by ``(s + t) % W``): 10^6 simulations in a few MB at
    most (measured: tests/stream/test_final_activity_reads.py's docstring)."""
    if not ids:
        return []
    sid = np.array(ids, dtype=np.int64)
    flat = itertools.chain.from_iterable(map(got.__getitem__, ids))
    pairs = np.fromiter(flat, dtype=np.int64, count=2 * len(ids)).reshape(-1, 2)
    # where each run of ids starts, then its end
    cut = np.flatnonzero(np.diff(sid) != 1) + 1
    starts, ends = np.concatenate(([0], cut)), np.concatenate((cut, [sid.size]))
    steps, refused = _repeats(pairs[:, 0], cut), _repeats(pairs[:, 1], cut)
    return [
        f"{sid[a]}+{b - a}\t-\t{st}\t{rf}\t-"
        for a, b, st, rf in zip(starts.tolist(), ends.tolist(), steps, refused, strict=True)
    ]


def _repeats(values: np.ndarray, cut: np.ndarray) -> list[str]:
    """`values` as ``v`` or ``v*k`` items, comma-separated, one string per run of ids
    (their starts but the first: `cut`) (`_run_lines`)."""
    # an item starts where the value changes, or a run of ids starts
    new = np.ones(values.size, dtype=bool)
    new[1:] = values[1:] != values[:-1]
    new[cut] = True
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, values.size))
    items = [
        f"{v}*{k}" if k > 1 else str(v)
        for v, k in zip(values[first].tolist(), count.tolist(), strict=True)
    ]
    # which item each run of ids starts at
    bounds = np.searchsorted(first, np.concatenate(([0], cut, [values.size]))).tolist()
    return [",".join(items[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]


def _read_run(parts: list[str], path: Path, number: int) -> dict[int, tuple[int, int]]:
    """The samples of a run line (`_run_lines`), split at its tabs.

    Raises:
        ValueError: not such a line (names the file and the line).
    """
    first, _, n = parts[0].partition("+")
    try:
        if len(parts) != 5 or parts[1] != "-" or parts[4] != "-":
            raise ValueError("fields")
        if not (first.isdigit() and n.isdigit()):
            raise ValueError("ids")
        steps, refused = _values(parts[2], int(n)), _values(parts[3], int(n))
    except ValueError:
        raise ValueError(
            f"{path}: line {number} {chr(9).join(parts)!r} is not 'first id+n<TAB>-<TAB>"
            "steps<TAB>refused<TAB>-', steps and refused n values 'v' or 'v*k'"
        ) from None
    ids = range(int(first), int(first) + int(n))
    return dict(zip(ids, zip(steps, refused, strict=True), strict=True))


def _values(field: str, n: int) -> list[int]:
    """The n values of a `_repeats` field (ValueError: not n such values)."""
    if field.replace(",", "").isdigit():  # (no repeats: the values as they are)
        out = [int(v) for v in field.split(",")]
        if len(out) != n or "" in field.split(","):
            raise ValueError(field)
        return out
    out = []
    for item in field.split(","):
        value, star, repeats = item.partition("*")
        if not value.isdigit() or (star and not repeats.isdigit()):
            raise ValueError(item)
        out.extend([int(value)] * (int(repeats) if star else 1))
    if len(out) != n:
        raise ValueError(field)
    return out


def clear_activity_files(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's heartbeat files (rank 0, before it launches anything:
    the other ranks write theirs once a message came, so after)."""
    for path in Path(directory).glob(f"{ACTIVITY_FILE}.*"):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # (its run id still tells it apart, where there is one)
            logger.debug("removing %s: %s", path, exc)
