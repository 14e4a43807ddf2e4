"""The checks an `exploration.Exploration` state passes before the exploration continues
from it: the remembered points, the "lhs" design's size and points used, and the design
held (so that a resume need not optimise it again).

Kept apart from `exploration`, whose draws they do not touch. Pure functions of plain
data (numpy only); each raises a ValueError naming what is malformed, and nothing has
changed then (`Exploration.load_state_dict` calls them all before it changes anything).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["LHS_MAX_BLOCK", "checked_design", "checked_held_design", "checked_points"]

#: "lhs": the largest design (its optimisation costs O(size^2) per pass); a longer
#: budget is explored by consecutive designs of this size
LHS_MAX_BLOCK = 1024


def _numbers(row: Any, width: int) -> bool:
    """`row` is a list of `width` numbers (not bools) in [0, 1]."""
    return (
        isinstance(row, list)
        and len(row) == width
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in row)
        and all(0.0 <= v <= 1.0 for v in row)
    )


def checked_points(saved: Any, width: int, candidates: int, memory: int | None) -> list[np.ndarray]:
    """A state's remembered points (``drawn``): at most `memory` rows of `width`
    numbers in [0, 1], none with ``candidates=1`` (which remembers nothing)."""
    if not isinstance(saved, list):
        raise ValueError(f"exploration state has no list of drawn points: {saved!r}")
    if memory is not None and len(saved) > memory:
        raise ValueError(f"exploration state has {len(saved)} points, over memory")
    if saved and candidates == 1:
        raise ValueError("exploration state has drawn points, but candidates=1 keeps none")
    points = []
    for item in saved:
        if not _numbers(item, width):
            raise ValueError(f"exploration state has a malformed point {item!r}")
        points.append(np.array(item, dtype=np.float64))
    return points


def checked_design(state: Mapping[str, Any], explored: int) -> tuple[int | None, list[int]]:
    """An "lhs" state's ``size`` and ``used``, checked against its draws."""
    size, used = state.get("size"), state.get("used")
    if size is None and explored == 0 and used == []:
        return None, []  # saved before its first draw, unplanned
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= LHS_MAX_BLOCK:
        raise ValueError(f"exploration state has an invalid design size {size!r}")
    valid = isinstance(used, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < size for i in used
    )
    # a design whose every point was drawn keeps them all until the next draw starts
    # the next design (saved then, its state must load: a study checkpointed after
    # its whole planned budget was drawn)
    taken = explored % size or (size if explored else 0)
    if not valid or len(set(used)) != len(used) or len(used) != taken:  # type: ignore[arg-type]
        raise ValueError(
            f"exploration state has design points used {used!r}: not {taken} "
            f"distinct points of a design of {size}"
        )
    assert isinstance(used, list)  # for mypy
    return size, list(used)


def checked_held_design(
    saved: Any, engine: str, size: int | None, width: int
) -> tuple[int, np.ndarray | None]:
    """An "lhs" state's design held, ``{"block": b, "points": rows}``, as (b, the
    points): `size` rows of `width` numbers in [0, 1]. (-1, None) for a state without
    one: saved before its design was computed, or before states held it (the design is
    then computed from the seed when a draw needs it: the same points)."""
    if saved is None:
        return -1, None
    block = saved.get("block") if isinstance(saved, Mapping) else None
    points = saved.get("points") if isinstance(saved, Mapping) else None
    valid = (
        engine == "lhs"
        and size is not None
        and isinstance(block, int)
        and not isinstance(block, bool)
        and block >= 0
        and isinstance(points, list)
        and len(points) == size
        and all(_numbers(row, width) for row in points)
    )
    if not valid:
        raise ValueError(f"exploration state has a malformed design: {str(saved)[:80]}")
    assert size is not None and isinstance(block, int)  # for mypy
    return block, np.array(points, dtype=np.float64).reshape(size, width)
