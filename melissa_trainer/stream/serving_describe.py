"""DESCRIBE and DESCRIPTION (docs/protocol.md, section 16): a client given a serving
endpoint directly (no serve file, which publishes the inputs) asks the trainer which
inputs it serves before its first request on a connection, then checks each request
before sending it, as with a rendezvous. Without it a request more than 1 MiB over the
declared inputs (numpy's float64 for a large float32 input) is over the serving socket's
``ZMQ_MAXMSGSIZE``: libzmq closes the connection without a word (user trial 32).

Both messages reuse the serving channel's encoding, nothing new to parse:

* DESCRIBE: a PREDICT header (kind 6) with `FLAG_DESCRIBE` set, no arrays (n = 0), no
  run id: exactly 30 bytes, one frame. A trainer before it refuses it ``bad_request``
  ("a PREDICT carries at least one array"), by its request id: the client then knows
  that the trainer does not describe, at once (`PredictRefused` is never raised for it).
* DESCRIPTION: a PREDICTION header (kind 7) with `FLAG_DESCRIBE` set, its array
  descriptions the declared inputs (dtype code, shape, name), no payload frame.

Nothing is unpickled and no JSON is parsed. Standard library, numpy and the protocol's
layout only (the trainer's `PredictServer` and the client's `Predictor` both use it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.wire import FieldSpec, ProtocolError
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
    VERSION,
)

__all__ = [
    "FLAG_DESCRIBE",
    "Description",
    "decode_answer",
    "described",
    "encode_describe",
    "encode_description",
    "is_describe",
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
    """The one frame of a DESCRIPTION of `inputs` (`protocol.field_specs`' FieldSpecs)."""
    head = PREFIX.pack(MAGIC, VERSION, PREDICTION, FLAG_DESCRIBE, simulation_id)
    parts = [head, PREDICTION_FIXED.pack(request_id, version, len(inputs), 0)]
    for spec in inputs:
        name = spec.name.encode()
        parts.append(ARRAY_FIXED.pack(DTYPE_CODES[spec.dtype], len(spec.shape), len(name), 0))
        parts.append(DIMS[len(spec.shape)].pack(*spec.shape) + name)
    return b"".join(parts)


def decode_answer(
    frames: Sequence[Any], max_bytes: int
) -> Description | protocol.Prediction | protocol.Refusal:
    """A reply on the serving channel: a DESCRIPTION (validated here), else a
    PREDICTION or a REFUSED (`protocol.decode_reply`, bounded by `max_bytes`).

    Raises:
        ProtocolError: the reply breaks section 16.
    """
    head = frames[0] if frames else b""
    if len(head) < PREFIX.size or PREFIX.unpack_from(head)[3] != FLAG_DESCRIBE:
        return protocol.decode_reply(frames, max_bytes)
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
    return Description(sim, request_id, model, _specs(head, fixed_end, count))


def _specs(head: Any, at: int, count: int) -> list[FieldSpec]:
    """The `count` array descriptions from byte `at` of `head`, which they end exactly."""
    size = len(head)
    specs: dict[str, tuple[tuple[int, ...], Any]] = {}
    for _ in range(count):
        if size < at + ARRAY_FIXED.size:
            raise ProtocolError("truncated", f"input description cut at byte {size}")
        code, ndim, name_len, reserved = ARRAY_FIXED.unpack_from(head, at)
        at += ARRAY_FIXED.size
        if code not in DTYPES or ndim > MAX_NDIM or not name_len or reserved:
            raise ProtocolError(
                "bad_request", f"input description: dtype code {code}, ndim {ndim}, name "
                f"length {name_len}, reserved {reserved}"
            )  # fmt: skip
        end = at + DIM_BYTES * ndim + name_len
        if size < end:
            raise ProtocolError("truncated", f"input description needs {end} bytes, got {size}")
        shape = DIMS[ndim].unpack_from(head, at)
        try:
            name = bytes(head[at + DIM_BYTES * ndim : end]).decode()
        except UnicodeDecodeError:
            raise ProtocolError("bad_name", "an input's name is not UTF-8") from None
        if name in specs:
            raise ProtocolError("bad_request", f"input {name!r} described twice")
        specs[name] = (tuple(shape), DTYPES[code])
        at = end
    if at != size:
        raise ProtocolError("bad_size", f"{size - at} bytes after the input descriptions")
    try:  # (a dimension 0, a reserved name: the rules of a declared field)
        return protocol.field_specs(specs)
    except ValueError as exc:
        raise ProtocolError("bad_request", f"inputs described: {exc}") from None
