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

The parameters' order (`order`, `arrange`): a sample's ``parameters`` vector is in the
study's order, whatever order a solver lists its names in (the Python, C and Fortran
clients send them in the order given: ``Client(parameters=...)``, ``mt_set_parameter``,
the launcher's JSON). The study's order is the given names' (a `Study`: its sampler's),
and `Ingest.hello` builds every simulation's vector in it (`arrange`); a model taking
the vector as input reads each parameter at one index. With no names given, it is the
first admitted HELLO's, and a HELLO listing the same names in another order is refused
(not reordered): each training rank learns from the first HELLO *it* sees, so a
reordering could differ between ranks, and the order of evaluation samples built by
hand would depend on which solver came first; a refusal names both orders and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.wire import FieldSpec

__all__ = [
    "StudySchema",
    "parameters_difference",
    "parameters_order_difference",
    "schema_difference",
]

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


def parameters_order_difference(study: Sequence[str], declared: Sequence[str]) -> str:
    """Why a HELLO listing the study's parameter names in another order is refused (no
    names given: see the module docstring), and the fix."""
    return (
        f"HELLO lists its parameters in the order {list(declared)}, the study's first "
        f"simulation listed them {list(study)}: a sample's parameter vector is in one "
        f"order, list them in that order in every solver, or give the order: "
        f"ReceiverConfig(parameters={list(study)}) (StreamSource(config=...)), and each "
        f"simulation's vector is built in it whatever order its solver lists them"
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
        #: the parameter names every simulation sends, in the order given (None: no
        #: rule). Given, never learned: simulations started by hand may each have
        #: their own set of names.
        self.parameters: tuple[str, ...] | None = None if parameters is None else tuple(parameters)
        #: the study's parameter order (the module docstring): the given names', else
        #: the first admitted HELLO's (learned, saved in checkpoints: `load_order`)
        self.order: tuple[str, ...] | None = self.parameters

    def admit(self, declared: Sequence[FieldSpec], parameters: Sequence[str] = ()) -> str | None:
        """None if a new simulation may declare `declared` with parameters named
        `parameters`, in the order its solver lists them (the first one admitted fixes
        the study's fields, and with no names given the parameters' order), else why
        it may not."""
        names = tuple(parameters)
        if self.parameters is not None and sorted(names) != sorted(self.parameters):
            return parameters_difference(sorted(self.parameters), sorted(names))
        if self.enforce:
            if self.fields is None:
                self.fields = tuple(declared)
            elif tuple(declared) != self.fields:
                return schema_difference(self.fields, declared)
        if self.parameters is None and names:  # no names given: one order (docstring)
            if self.order is None:
                self.order = names
            elif names != self.order and sorted(names) == sorted(self.order):
                return parameters_order_difference(self.order, names)
        return None

    def arrange(self, parameters: dict[str, float]) -> dict[str, float]:
        """`parameters` in the study's order: the one place a simulation's parameter
        vector gets its order (`Ingest.hello`). Parameters named otherwise than the
        study's (no names given: each simulation may have its own) keep theirs."""
        order = self.order
        if order is None or list(parameters) == list(order) or parameters.keys() != set(order):
            return parameters
        return {name: parameters[name] for name in order}

    def load_order(self, order: Sequence[str] | None) -> None:
        """Restore a checkpoint's `order` unless names were given (those win)."""
        if order and self.parameters is None:
            self.order = tuple(str(n) for n in order)

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
