"""What a client is told, by its arguments or by the environment the launcher sets: its
simulation id, the receivers' endpoints, its parameters and its fields. Each is
checked, with an error that names the value and the fix. Imports the standard
library, numpy and pyzmq only (through `protocol` and `endpoints`): no torch."""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from melissa_trainer.stream import protocol
from melissa_trainer.stream.endpoints import fetch_endpoints
from melissa_trainer.stream.protocol import FieldSpec

#: The simulation id (an unsigned 64-bit decimal integer).
ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
#: Comma-separated receiver endpoints, in training-rank order.
ENV_ENDPOINTS = "MELISSA_TRAINER_ENDPOINTS"
#: A directory holding one `rank_{r}.json` per receiver (used when ENDPOINTS is unset).
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"
#: The simulation's parameters, a JSON object of name -> number (set by the launcher).
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
#: Names a field may not have: the receiver adds these entries to every sample.
RESERVED_NAMES = frozenset({"simulation_id", "time_step", "parameters"})

_U64 = 1 << 64


def resolve_endpoints(
    endpoints: str | Sequence[str] | None, rendezvous_timeout: float
) -> list[str]:
    """The receiver endpoints: `endpoints` (a list, or one comma-separated string), else
    `$MELISSA_TRAINER_ENDPOINTS`, else those published in `$MELISSA_TRAINER_RENDEZVOUS`
    (waiting up to `rendezvous_timeout` seconds for them)."""
    if endpoints is None:
        value = os.environ.get(ENV_ENDPOINTS, "").strip()
        if value:
            endpoints = value
        elif os.environ.get(ENV_RENDEZVOUS, "").strip():
            return fetch_endpoints(os.environ[ENV_RENDEZVOUS].strip(), rendezvous_timeout)
        else:
            raise ValueError(
                f"no receiver endpoint: pass endpoints=, or set {ENV_ENDPOINTS} (comma-"
                f"separated, e.g. tcp://127.0.0.1:5555) or {ENV_RENDEZVOUS} (the trainer's "
                f"rendezvous directory, {{output_dir}}/rendezvous)"
            )
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    out = [str(e).strip() for e in items]
    if not out or any("://" not in e for e in out):
        raise ValueError(f"endpoints must be like tcp://HOST:PORT, got {endpoints!r}")
    return out


def check_simulation_id(value: Any) -> int:
    """`value`, else `$MELISSA_TRAINER_SIMULATION_ID`, as a u64."""
    source = "simulation_id"
    if value is None:
        value = os.environ.get(ENV_SIMULATION_ID)
        source = ENV_SIMULATION_ID
        if value is None:
            raise ValueError(f"no simulation id: pass simulation_id=, or set {ENV_SIMULATION_ID}")
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{ENV_SIMULATION_ID}={value!r} is not an integer") from None
    return _u64(source, value)


def check_time_step(value: Any) -> int:
    """`value` as a u64 time step (any index-like integer)."""
    return _u64("time_step", value)


def _u64(name: str, value: Any) -> int:
    """`value` as an integer in [0, 2**64) (a u64 on the wire), or ValueError naming `name`."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {value!r}") from None
    if not 0 <= number < _U64:
        raise ValueError(f"{name}={number} is out of range [0, 2**64)")
    return number


def check_parameters(parameters: Mapping[str, float] | None) -> dict[str, float]:
    """`parameters`, else the JSON object in `$MELISSA_TRAINER_PARAMETERS`, else none:
    string names, finite float values, in the given order."""
    if parameters is None and os.environ.get(ENV_PARAMETERS, "").strip():
        try:
            parameters = json.loads(os.environ[ENV_PARAMETERS])
        except ValueError:
            raise ValueError(f"{ENV_PARAMETERS} is not valid JSON") from None
        if not isinstance(parameters, dict):
            raise ValueError(f"{ENV_PARAMETERS} must be a JSON object of name -> number")
    out: dict[str, float] = {}
    for key, value in (parameters or {}).items():
        if not isinstance(key, str):
            raise ValueError(f"parameter names must be strings, not {key!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {key!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"parameter {key!r}: {number} is not finite")
        out[key] = number
    return out


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
        if not isinstance(name, str) or not 1 <= len(name.encode()) <= protocol.MAX_NAME_BYTES:
            raise ValueError(
                f"field name {name!r} must be a string of 1 to {protocol.MAX_NAME_BYTES} "
                f"UTF-8 bytes"
            )
        if name in RESERVED_NAMES:
            raise ValueError(f"field name {name!r} is reserved ({sorted(RESERVED_NAMES)})")
        try:
            dims = (operator.index(shape),) if not isinstance(shape, Iterable) else shape
            dims = tuple(operator.index(d) for d in dims)
        except TypeError:
            raise ValueError(f"field {name!r}: shape {shape!r} is not a tuple of ints") from None
        if len(dims) > protocol.MAX_NDIM or any(not 1 <= d < _U64 for d in dims):
            raise ValueError(
                f"field {name!r}: shape {dims} must have at most {protocol.MAX_NDIM} "
                f"positive dimensions"
            )
        try:
            if dtype is None:
                raise TypeError
            code = protocol.dtype_code(dtype)
        except TypeError:
            raise ValueError(f"field {name!r}: {dtype!r} is not a dtype") from None
        except ValueError as exc:
            raise ValueError(f"field {name!r}: {exc}") from None
        specs.append(FieldSpec(name, protocol.DTYPES[code], dims))
    if not specs:
        raise ValueError("declare at least one field")
    if len({s.name for s in specs}) != len(specs):
        raise ValueError(f"field names must be unique: {[s.name for s in specs]}")
    return specs
