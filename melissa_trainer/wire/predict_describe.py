"""The serving channel's array descriptions, and DESCRIBE and DESCRIPTION
(docs/protocol.md, section 16). Standard library, numpy and the protocol's layout only.

**Array descriptions.** A PREDICT, a PREDICTION and a DESCRIPTION describe their arrays
alike: dtype code (u8), ndim (u8, at most 8), name length L (u8, at least 1), a reserved
zero byte, ndim u64 dimensions (each at least 1), L bytes of UTF-8 name.
`pack_descriptions` writes them and `read_descriptions` reads and checks them: their one
implementation (`predict` uses them for the arrays of PREDICT and PREDICTION, this
module for a DESCRIPTION's inputs; the C client reads the same bytes, clients/c/src/
reply.c and predict_describe.c; tests/wire/test_predict_describe_bytes.py pins them).

**DESCRIBE and DESCRIPTION.** A client given a serving endpoint directly (no serve file,
which publishes the inputs) asks the trainer which inputs it serves before its first
request on a connection, then checks each request before sending it, as with a
rendezvous. Without it a request more than 1 MiB over the declared inputs (numpy's
float64 for a large float32 input) is over the serving socket's ``ZMQ_MAXMSGSIZE``:
libzmq closes the connection without a word (user trial 32). Both messages reuse the
serving channel's encoding, nothing new to parse:

* DESCRIBE: a PREDICT header (kind 6) with `FLAG_DESCRIBE` set, no arrays (n = 0), no
  run id: exactly 30 bytes, one frame. A trainer before it refuses it ``bad_request``
  ("a PREDICT carries at least one array"), by its request id: the client then knows
  that the trainer does not describe, at once (`PredictRefused` is never raised for it).
* DESCRIPTION: a PREDICTION header (kind 7) with `FLAG_DESCRIBE` set, its array
  descriptions the declared inputs (dtype code, shape, name), no payload frame.

The trainer's `PredictServer` answers with `described`; the client's `Predictor`
reads any reply with `predict.decode_answer`, which hands a DESCRIPTION to
`decode_description`. Nothing is unpickled and no JSON is parsed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from melissa_trainer.wire.checks import field_specs
from melissa_trainer.wire.layout import (
    ARRAY_FIXED,
    DIM_BYTES,
    DIMS,
    DTYPE_CODES,
    DTYPES,
    MAGIC,
    MAX_NDIM,
    MAX_PREDICT_ARRAYS,
    PREDICT,
    PREDICT_FIXED,
    PREDICTION,
    PREDICTION_FIXED,
    PREFIX,
    U64_LIMIT,
    VERSION,
)
from melissa_trainer.wire.messages import FieldSpec, ProtocolError

__all__ = [
    "FLAG_DESCRIBE",
    "Description",
    "decode_description",
    "described",
    "encode_describe",
    "encode_description",
    "is_describe",
    "pack_descriptions",
    "read_descriptions",
]

#: PREDICT's and PREDICTION's flag of a DESCRIBE and its DESCRIPTION
FLAG_DESCRIBE = 0x1
_DESCRIBE_BYTES = PREFIX.size + PREDICT_FIXED.size  # 30


@dataclass(frozen=True)
class Description:
    """A decoded DESCRIPTION: the inputs the trainer serves, at model `version`."""

    simulation_id: int
    request_id: int
    version: int
    inputs: list[FieldSpec]


# -- array descriptions ------------------------------------------------------------------


def pack_descriptions(arrays: Iterable[tuple[str, np.dtype, tuple[int, ...]]]) -> bytes:
    """The descriptions of `arrays` (name, dtype, shape), in their order.

    Raises:
        ValueError: a dtype not in the allow-list (little-endian), a name not of 1 to
            255 UTF-8 bytes, or more than `MAX_NDIM` dimensions.
    """
    parts = []
    for name, dtype, shape in arrays:
        raw = name.encode()
        code = DTYPE_CODES.get(dtype)
        if code is None or not 1 <= len(raw) <= 255 or len(shape) > MAX_NDIM:
            raise ValueError(
                f"array {name!r}: dtype {dtype} (one of {sorted(map(str, DTYPE_CODES))}, "
                f"little-endian), name of 1 to 255 bytes, at most {MAX_NDIM} dimensions"
            )
        parts.append(ARRAY_FIXED.pack(code, len(shape), len(raw), 0))
        parts.append(DIMS[len(shape)].pack(*shape) + raw)
    return b"".join(parts)


def read_descriptions(
    head: Any,
    at: int,
    count: int,
    *,
    noun: str = "array",
    max_bytes: int | None = None,
    reserved_zero: bool = False,
) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    """The `count` array descriptions (name, dtype, shape) from byte `at` of the frame
    `head`, which they must end exactly; `noun` names them in errors.

    Raises:
        ProtocolError: checked in this order (section 16), per description:
            ``truncated``, ``bad_dtype``, ``bad_shape`` (ndim), ``bad_request`` (a
            reserved byte set, with `reserved_zero`), ``truncated``, ``bad_shape`` (a
            dimension 0), ``bad_name`` (empty or not UTF-8), ``bad_request`` (a name
            twice), ``too_large`` (the arrays' bytes so far above `max_bytes`, None:
            no bound); then ``bad_size`` (bytes after the last description).
    """
    size = len(head)
    specs: list[tuple[str, np.dtype, tuple[int, ...]]] = []
    total = 0
    for _ in range(count):
        if size < at + ARRAY_FIXED.size:
            raise ProtocolError("truncated", f"{noun} description cut at byte {size}")
        code, ndim, name_len, reserved = ARRAY_FIXED.unpack_from(head, at)
        at += ARRAY_FIXED.size
        dtype = DTYPES.get(code)
        if dtype is None:
            raise ProtocolError("bad_dtype", f"dtype code {code} is not in the allow-list")
        if ndim > MAX_NDIM:
            raise ProtocolError("bad_shape", f"{ndim} dimensions, at most {MAX_NDIM}")
        if reserved_zero and reserved:
            raise ProtocolError("bad_request", f"{noun} description's reserved byte {reserved}")
        end = at + DIM_BYTES * ndim + name_len
        if size < end:
            raise ProtocolError("truncated", f"{noun} description needs {end} bytes, got {size}")
        shape = tuple(DIMS[ndim].unpack_from(head, at))
        if not all(1 <= d < U64_LIMIT for d in shape):
            raise ProtocolError("bad_shape", f"shape {shape}: dimensions must be >= 1")
        try:
            name = bytes(head[at + DIM_BYTES * ndim : end]).decode()
        except UnicodeDecodeError:
            raise ProtocolError("bad_name", f"{noun} name is not UTF-8") from None
        if not name:
            raise ProtocolError("bad_name", f"empty {noun} name")
        if any(name == s[0] for s in specs):
            raise ProtocolError("bad_request", f"{noun} {name!r} given twice")
        total += math.prod(shape) * dtype.itemsize
        if max_bytes is not None and total > max_bytes:
            raise ProtocolError(
                "too_large",
                f"arrays of more than {max_bytes} bytes ({noun} {name!r} is {dtype.str} {shape})",
            )
        specs.append((name, dtype, shape))
        at = end
    if at != size:
        raise ProtocolError("bad_size", f"{size - at} bytes after the {noun} descriptions")
    return specs


# -- DESCRIBE and DESCRIPTION ------------------------------------------------------------


def encode_describe(simulation_id: int, request_id: int) -> bytes:
    """The one frame of a DESCRIBE."""
    head = PREFIX.pack(MAGIC, VERSION, PREDICT, FLAG_DESCRIBE, simulation_id)
    return head + PREDICT_FIXED.pack(request_id, 0, 0, 0)


def is_describe(parts: Sequence[Any]) -> bool:
    """Whether `parts` (a message without its peer's identity) is a DESCRIBE: a PREDICT
    whose flags say so (its other rules are `described`'s)."""
    if not parts or len(parts[0]) < PREFIX.size:
        return False
    magic, version, kind, flags, _ = PREFIX.unpack_from(parts[0])
    return magic == MAGIC and version == VERSION and kind == PREDICT and bool(flags)


def described(parts: Sequence[Any], inputs: Sequence[FieldSpec], version: int) -> bytes:
    """The DESCRIPTION answering the DESCRIBE `parts`: `inputs` at model `version`.

    Raises:
        ProtocolError: not exactly a DESCRIBE (``bad_request``: other flags, arrays or
            a run id; ``bad_size``, ``unexpected_frame``).
    """
    head = parts[0]
    _, _, _, flags, sim = PREFIX.unpack_from(head)
    if flags != FLAG_DESCRIBE:
        raise ProtocolError("bad_request", f"PREDICT flags {flags:#x} (a DESCRIBE has 0x1)")
    if len(head) != _DESCRIBE_BYTES:
        raise ProtocolError("bad_size", f"DESCRIBE of {len(head)} bytes, not {_DESCRIBE_BYTES}")
    if len(parts) > 1:
        raise ProtocolError("unexpected_frame", "a DESCRIBE has one frame")
    request_id, _, count, run_len = PREDICT_FIXED.unpack_from(head, PREFIX.size)
    if count or run_len:
        raise ProtocolError("bad_request", "a DESCRIBE carries no array and no run id")
    return encode_description(sim, request_id, version, inputs)


def encode_description(
    simulation_id: int, request_id: int, version: int, inputs: Sequence[FieldSpec]
) -> bytes:
    """The one frame of a DESCRIPTION of `inputs` (`wire.field_specs`' FieldSpecs)."""
    head = PREFIX.pack(MAGIC, VERSION, PREDICTION, FLAG_DESCRIBE, simulation_id)
    fixed = PREDICTION_FIXED.pack(request_id, version, len(inputs), 0)
    return head + fixed + pack_descriptions((s.name, s.dtype, s.shape) for s in inputs)


def decode_description(frames: Sequence[Any]) -> Description:
    """Parse and validate a DESCRIPTION: a reply whose flags are `FLAG_DESCRIBE`
    (`predict.decode_answer` hands it here).

    Raises:
        ProtocolError: the reply breaks section 16 (another kind with the flag, not one
            frame, no input or more than 255, a reserved byte set, a description
            `read_descriptions` refuses, an input of a reserved name).
    """
    head = frames[0]
    magic, version, kind, _, sim = PREFIX.unpack_from(head)
    if magic != MAGIC or version != VERSION or kind != PREDICTION:
        raise ProtocolError("bad_kind", f"kind {kind} with the DESCRIBE flag (version {version})")
    fixed_end = PREFIX.size + PREDICTION_FIXED.size
    if len(head) < fixed_end:
        raise ProtocolError("truncated", f"DESCRIPTION of {len(head)} bytes")
    if len(frames) > 1:
        raise ProtocolError("unexpected_frame", "a DESCRIPTION has one frame")
    request_id, model, count, reserved = PREDICTION_FIXED.unpack_from(head, PREFIX.size)
    if not 1 <= count <= MAX_PREDICT_ARRAYS or reserved:
        raise ProtocolError("bad_request", f"DESCRIPTION of {count} inputs, reserved {reserved}")
    specs = read_descriptions(head, fixed_end, count, noun="input", reserved_zero=True)
    try:  # (a reserved name: the rules of a declared field)
        inputs = field_specs({name: (shape, dtype) for name, dtype, shape in specs})
    except ValueError as exc:
        raise ProtocolError("bad_request", f"inputs described: {exc}") from None
    return Description(sim, request_id, model, inputs)
