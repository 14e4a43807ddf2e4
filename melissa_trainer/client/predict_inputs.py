"""What a `Predictor` sends, made from what its caller gives, before anything is sent:
the request's arrays and its frames, and the predictor's simulation id.

Contract: each function either returns what the wire carries or raises ValueError naming
the argument and the fix (a mistake in the call, said as one whatever the trainer's
state: no socket, no lookup, nothing sent here).

* `prepared_arrays`: ``{name: array}`` with each name a `str` (the protocol's names are
  strings: ``ServingHook(inputs=...)``, the fields, the parameters; a name of another
  type is refused, and one whose ``str()`` is another name of the mapping is said to
  collide with it: turned into strings, ``{1: a, "1": b}`` sent ``b`` alone), each
  array C-contiguous and little-endian, none with a dimension of 0.
* `request_frames`: the PREDICT of those arrays (`wire.encode_predict`: a dtype, name
  or rank the wire does not carry, or not 1 to 255 inputs, is its ValueError), its
  timeout in milliseconds capped at the wire's u32.
* `checked_predictor_id`: a simulation id, an integer in [0, 2**64).

Imports numpy and the `wire` and client `config` modules only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.client.config import check_simulation_id

__all__ = ["checked_predictor_id", "prepared_arrays", "request_frames"]

_MAX_TIMEOUT_MS = 2**32 - 1  # (PREDICT's timeout field, docs/protocol.md section 16)


def prepared_arrays(inputs: Mapping[Any, Any]) -> dict[str, np.ndarray]:
    """`inputs` as C-contiguous little-endian arrays under their names; ValueError for a
    name that is not a `str` (naming the name it collides with, if any) and for an array
    with a dimension of 0 (as the C client's check: the wire's encoding failed on it with
    a bare TypeError "memoryview: cannot cast view with zeros in shape")."""
    out = {}
    for name, value in inputs.items():
        if not isinstance(name, str):
            raise ValueError(_not_a_string(name, inputs))
        arr = np.asarray(value)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if arr.ndim and not arr.size:
            raise ValueError(
                f"predict(): input {name!r} has shape {arr.shape}: dimensions must be >= 1"
            )
        out[name] = np.ascontiguousarray(arr) if arr.ndim else arr
    return out


def _not_a_string(name: Any, inputs: Mapping[Any, Any]) -> str:
    """The words for input `name`, not a `str`: what it is, the fix, and the name of
    `inputs` it would have collided with once turned into a string."""
    said = (
        f"predict(): input names must be strings (the names the trainer's "
        f"ServingHook(inputs=...) declares), not {name!r} ({type(name).__name__})"
    )
    if str(name) in inputs:
        said += f": it would collide with the input named {str(name)!r}"
    return said + f": pass {{{str(name)!r}: array}}"


def request_frames(
    simulation_id: int,
    request_id: int,
    timeout: float,
    run_id: str | None,
    arrays: dict[str, np.ndarray],
) -> list[Any]:
    """The PREDICT of `arrays` (ValueError: a dtype, name or rank the wire does not
    carry, or not 1 to 255 inputs: `wire.encode_predict`)."""
    # (the wire's timeout is a u32 of milliseconds: a longer wait is sent as its
    # largest, 49.7 days, as the C client does; the trainer drops a request only
    # once it is older than that)
    # (capped before rounding: a timeout of 1e308 s is finite, its milliseconds are
    # not, and round(inf) raised OverflowError, a user's trial)
    timeout_ms = max(1, round(min(timeout * 1000, _MAX_TIMEOUT_MS)))
    return protocol.encode_predict(simulation_id, request_id, timeout_ms, run_id, arrays)


def checked_predictor_id(value: Any) -> int:
    """`value` as a simulation id, an integer in [0, 2**64) (a u64 on the wire, as the
    `Client`'s and the C client's), else ValueError naming `simulation_id` and the fix:
    a bad one failed at the first request with a bare `struct.error` ("argument out of
    range"), a string with a TypeError of a log format, and a float waited its whole
    timeout for "rank 0.5 of 1" (a user trial)."""
    if value is None or isinstance(value, str | bytes):
        fix = (
            "give the id as an int (int(...) of a value read from the environment or the "
            "command line)"
            if value is not None
            else "give this simulation's id, an int"
        )
        raise ValueError(f"Predictor: simulation_id must be an integer, not {value!r}: {fix}")
    try:
        return check_simulation_id(value)
    except ValueError as exc:
        raise ValueError(
            f"Predictor: {exc}: give this simulation's id, an integer >= 0 (a u64)"
        ) from None
