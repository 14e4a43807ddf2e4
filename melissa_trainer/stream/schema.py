"""One schema per study: the fields, and the parameters, every simulation must declare
in its HELLO.

`StudySchema` is owned by the receiver's `Ingest` (one per training rank) and saved in
its checkpoint. The fields are given (``ReceiverConfig(fields=...)``) or taken from the
first accepted HELLO; a later simulation declaring others is refused with a message
that says how they differ. The parameters' names likewise, when given
(``ReceiverConfig(parameters=...)``, which a `Study` sets to its sampler's): a
simulation started without its parameters (by hand, outside the launcher) is refused at
its HELLO, named, rather than trained on with an empty parameter vector. Not
thread-safe: the ingesting thread alone calls `admit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.wire import FieldSpec

__all__ = ["StudySchema", "parameters_difference", "schema_difference"]

#: how a simulation is given its parameters, for the messages
_GIVE = (
    "start it through the trainer's launcher, or give them: "
    "MELISSA_TRAINER_PARAMETERS='{...}' or Client(parameters={...})"
)


def parameters_difference(study: Sequence[str], declared: Sequence[str]) -> str:
    """How the parameter names of a HELLO differ from the study's, and the fix."""
    if not declared:
        return (
            f"HELLO carries no parameters, the study's simulations have {sorted(study)}: "
            f"it was started without them (by hand?); {_GIVE}"
        )
    missing = sorted(set(study) - set(declared))
    extra = sorted(set(declared) - set(study))
    parts = [f"{missing} missing" if missing else "", f"{extra} not the study's" if extra else ""]
    return (
        f"HELLO carries parameters {sorted(declared)}, the study's are {sorted(study)} "
        f"({'; '.join(p for p in parts if p)}); {_GIVE}"
    )


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

    def __init__(
        self,
        fields: Sequence[FieldSpec] | None = None,
        enforce: bool = False,
        parameters: Sequence[str] | None = None,
    ) -> None:
        self.fields: tuple[FieldSpec, ...] | None = None if fields is None else tuple(fields)
        self.enforce = enforce or fields is not None
        #: the parameter names every simulation sends (sorted; None: no rule). Given,
        #: never learned: simulations started by hand may each have their own.
        self.parameters: tuple[str, ...] | None = (
            None if parameters is None else tuple(sorted(parameters))
        )

    def admit(self, declared: Sequence[FieldSpec], parameters: Sequence[str] = ()) -> str | None:
        """None if a new simulation may declare `declared` with parameters named
        `parameters` (the first one fixes the study's fields), else why it may not."""
        names = tuple(sorted(parameters))
        if self.parameters is not None and names != self.parameters:
            return parameters_difference(self.parameters, names)
        if not self.enforce:
            return None
        if self.fields is None:
            self.fields = tuple(declared)
        elif tuple(declared) != self.fields:
            return schema_difference(self.fields, declared)
        return None

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
