"""The checks both sides make of what a simulation declares: its fields
(`field_specs`, with `dtype_code`) and its run id (`check_run_id`): the client before it
sends its HELLO, the receiver's configuration for its study's schema. They raise
`ValueError` (a caller's mistake), not `ProtocolError`. Standard library and numpy.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from melissa_trainer.common.words import closest_name
from melissa_trainer.wire.layout import (
    DTYPE_CODES,
    DTYPES,
    MAX_NAME_BYTES,
    MAX_NDIM,
    MAX_RUN_ID_CHARS,
    RESERVED_NAMES,
    U64_LIMIT,
)
from melissa_trainer.wire.messages import FieldSpec


def check_run_id(value: Any, name: str) -> str:
    """`value` if it is a valid run id (1 to `MAX_RUN_ID_CHARS` ASCII letters, digits,
    ``-`` or ``_``), else a ValueError naming `name`."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_RUN_ID_CHARS
        or not value.isascii()
        or not value.replace("-", "").replace("_", "").isalnum()
    ):
        raise ValueError(
            f"{name} must be 1 to {MAX_RUN_ID_CHARS} ASCII letters, digits, '-' or '_', "
            f"not {value!r}"
        )
    return value


def dtype_code(dtype: np.dtype | str | type) -> int:
    """The wire code of a numpy dtype (native byte order accepted), or ValueError."""
    dt = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).byteorder == "=" else np.dtype(dtype)
    code = DTYPE_CODES.get(dt)
    if code is None:
        allowed = sorted(str(d) for d in DTYPE_CODES)
        raise ValueError(f"dtype {np.dtype(dtype)} cannot be streamed; allowed: {allowed}")
    return code


def field_specs(fields: Mapping[str, tuple[Any, Any]] | Sequence[FieldSpec]) -> list[FieldSpec]:
    """The declared fields (`{name: (global shape, dtype)}` or FieldSpecs) as FieldSpecs
    with protocol dtypes, checked: unique, unreserved names; at most 8 positive dims."""
    items: Iterable[tuple[str, Any, Any]]
    if isinstance(fields, Mapping):
        items = []
        for name, declared in fields.items():
            try:
                shape, dtype = declared
            except (TypeError, ValueError):
                raise ValueError(
                    f"field {name!r}: declare it as (global shape, dtype), not {declared!r}"
                ) from None
            items.append((name, shape, dtype))
    else:
        items = []
        for spec in fields:
            if not isinstance(spec, FieldSpec):
                raise ValueError(f"fields must be a mapping or FieldSpecs, not {spec!r}")
            items.append((spec.name, spec.shape, spec.dtype))
    specs = []
    for name, shape, dtype in items:
        if not isinstance(name, str) or not 1 <= len(name.encode()) <= MAX_NAME_BYTES:
            raise ValueError(
                f"field name {name!r} must be a string of 1 to {MAX_NAME_BYTES} UTF-8 bytes"
            )
        if name in RESERVED_NAMES:
            raise ValueError(f"field name {name!r} is reserved ({sorted(RESERVED_NAMES)})")
        try:
            dims = (operator.index(shape),) if not isinstance(shape, Iterable) else shape
            dims = tuple(operator.index(d) for d in dims)
        except TypeError:
            raise ValueError(f"field {name!r}: shape {shape!r} is not a tuple of ints") from None
        if len(dims) > MAX_NDIM or any(not 1 <= d < U64_LIMIT for d in dims):
            raise ValueError(
                f"field {name!r}: shape {dims} must have at most {MAX_NDIM} positive dimensions"
            )
        try:
            if dtype is None:
                raise TypeError
            code = dtype_code(dtype)
        except TypeError:
            raise ValueError(f"field {name!r}: {dtype!r} is not a dtype{_hint(dtype)}") from None
        except ValueError as exc:
            raise ValueError(f"field {name!r}: {exc}") from None
        specs.append(FieldSpec(name, DTYPES[code], dims))
    if not specs:
        raise ValueError("declare at least one field")
    if len({s.name for s in specs}) != len(specs):
        raise ValueError(f"field names must be unique: {[s.name for s in specs]}")
    return specs


@functools.cache
def streamable_dtype_names() -> frozenset[str]:
    """numpy's names of the dtypes the stream carries ("float32", "double", "uint8"...)."""
    names = set()
    with warnings.catch_warnings():  # (numpy 2 warns of its deprecated aliases: 'a')
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in np.sctypeDict:
            if isinstance(name, str):
                try:
                    dtype_code(name)
                except (TypeError, ValueError):
                    continue
                names.add(name)
    return frozenset(names)


def _hint(dtype: object) -> str:
    """What follows "is not a dtype" for a name numpy does not know: the closest of
    `streamable_dtype_names` (``: did you mean 'float32'?``), else all of them; nothing
    for what is not a name."""
    if not isinstance(dtype, str):
        return ""
    close = closest_name(dtype, streamable_dtype_names())
    if close:
        return f": did you mean {close!r}?"
    return f": give one of numpy's names: {', '.join(sorted(streamable_dtype_names()))}"
