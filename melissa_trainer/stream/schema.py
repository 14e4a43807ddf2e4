"""One schema per study: the fields every simulation must declare in its HELLO.

`StudySchema` is owned by the receiver's `Ingest` (one per training rank) and saved in
its checkpoint. The fields are given (``ReceiverConfig(fields=...)``) or taken from the
first accepted HELLO; a later simulation declaring others is refused with a message
that says how they differ. Not thread-safe: the ingesting thread alone calls `admit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.stream.protocol import FieldSpec

__all__ = ["StudySchema", "schema_difference"]


def schema_difference(study: Sequence[FieldSpec], declared: Sequence[FieldSpec]) -> str:
    """How the fields a HELLO declares differ from the study's, in words."""
    mine, theirs = {f.name: f for f in study}, {f.name: f for f in declared}
    parts = []
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        a, b = mine.get(name), theirs.get(name)
        if a is None:
            parts.append(f"field {name!r} is not one of the study's")
        elif b is None:
            parts.append(f"field {name!r} is missing")
        elif (a.shape, a.dtype) != (b.shape, b.dtype):
            parts.append(
                f"field {name!r} is {b.dtype} {b.shape} where the study's is {a.dtype} {a.shape}"
            )
    if not parts:  # same fields, another order
        parts.append(f"fields in the order {list(theirs)}, the study's are {list(mine)}")
    return "HELLO declares other fields than the study's: " + "; ".join(parts)


class StudySchema:
    """The study's fields, or no rule at all.

    Args:
        fields: the fields every simulation must declare (None: see `enforce`).
        enforce: with no `fields`, the first admitted declaration becomes the study's;
            False (and no `fields`): every declaration is admitted (each simulation
            declares its own; a bare `Receiver`'s default).
    """

    def __init__(self, fields: Sequence[FieldSpec] | None = None, enforce: bool = False) -> None:
        self.fields: tuple[FieldSpec, ...] | None = None if fields is None else tuple(fields)
        self.enforce = enforce or fields is not None

    def admit(self, declared: Sequence[FieldSpec]) -> str | None:
        """None if a new simulation may declare `declared` (the first one fixes the
        study's fields), else why it may not."""
        if not self.enforce:
            return None
        if self.fields is None:
            self.fields = tuple(declared)
            return None
        if tuple(declared) == self.fields:
            return None
        return schema_difference(self.fields, declared)

    def to_json(self) -> list[dict[str, Any]] | None:
        if self.fields is None:
            return None
        return [{"name": f.name, "dtype": f.dtype.str, "shape": list(f.shape)} for f in self.fields]

    def load_json(self, data: list[dict[str, Any]] | None) -> None:
        """Restore `to_json()` unless fields were given (those win)."""
        if data is not None and self.fields is None:
            self.fields = tuple(
                FieldSpec(
                    str(f["name"]), np.dtype(str(f["dtype"])), tuple(int(d) for d in f["shape"])
                )
                for f in data
            )
