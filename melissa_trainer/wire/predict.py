"""The serving channel (docs/protocol.md, section 16): a simulation asks the trainer's
current model for a prediction (PREDICT) and gets the arrays with the model's version
(PREDICTION) or a refusal it can act on (REFUSED). Standard library and numpy.

A PREDICT or PREDICTION is a header frame, describing named arrays (dtype code, shape,
name, as in a DATA header), followed by one payload frame per array, its raw
little-endian C-ordered bytes: no pickle, no JSON on the per-request path. A REFUSED is
one frame. `decode_predict` (the trainer's side) and `decode_reply` (the client's)
validate everything before any array is built, and raise `ProtocolError` with a
`reason` of section 10's table, or ``bad_request`` for the header's own rules.

Arrays come back as read-only numpy views of the frames (no copy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from melissa_trainer.wire.checks import check_run_id
from melissa_trainer.wire.layout import (
    ARRAY_FIXED,
    DIM_BYTES,
    DIMS,
    DTYPE_CODES,
    DTYPES,
    KIND_AT,
    MAGIC,
    MAX_NDIM,
    MAX_PREDICT_ARRAYS,
    PREDICT,
    PREDICT_FIXED,
    PREDICTION,
    PREDICTION_FIXED,
    PREFIX,
    REFUSED,
    REFUSED_FIXED,
    U64,
    U64_LIMIT,
    VERSION,
)
from melissa_trainer.wire.messages import ProtocolError

__all__ = [
    "REFUSAL_CODES",
    "REFUSAL_REASONS",
    "PredictRequest",
    "Prediction",
    "Refusal",
    "decode_predict",
    "decode_reply",
    "encode_predict",
    "encode_prediction",
    "encode_refused",
    "peek_request_id",
]

#: REFUSED's reason code -> name: `busy` (the trainer's queue of requests is full:
#: back-pressure), `not_serving` (no model served yet, or no longer: the trainer is
#: starting or stopping), `wrong_run` (the request names another run), `bad_request`
#: (the request breaks this protocol or the declared inputs), `failed` (the trainer's
#: inference function raised on it).
REFUSAL_REASONS = {1: "busy", 2: "not_serving", 3: "wrong_run", 4: "bad_request", 5: "failed"}
REFUSAL_CODES = {name: code for code, name in REFUSAL_REASONS.items()}
#: Longest detail text of a REFUSED, in bytes (it is cut there).
MAX_DETAIL_BYTES = 1024


@dataclass(frozen=True)
class PredictRequest:
    """A decoded PREDICT: named input arrays (read-only views of the frames)."""

    simulation_id: int
    request_id: int
    timeout_ms: int  # the client's timeout (0: none): an older request is not answered
    run_id: str | None
    arrays: dict[str, np.ndarray]


@dataclass(frozen=True)
class Prediction:
    """A decoded PREDICTION: the outputs and the model version (global step) that made them."""

    simulation_id: int
    request_id: int
    version: int
    arrays: dict[str, np.ndarray]


@dataclass(frozen=True)
class Refusal:
    """A decoded REFUSED: why (a name of `REFUSAL_REASONS`), when to try again."""

    simulation_id: int
    request_id: int
    version: int
    reason: str
    retry_after_ms: int
    detail: str


def _arrays_header(arrays: Mapping[str, np.ndarray]) -> bytes:
    parts = []
    for name, arr in arrays.items():
        raw = name.encode()
        code = DTYPE_CODES.get(arr.dtype)
        if code is None or not 1 <= len(raw) <= 255 or arr.ndim > MAX_NDIM:
            raise ValueError(
                f"array {name!r}: dtype {arr.dtype} (one of {sorted(map(str, DTYPE_CODES))}, "
                f"little-endian), name of 1 to 255 bytes, at most {MAX_NDIM} dimensions"
            )
        parts.append(
            ARRAY_FIXED.pack(code, arr.ndim, len(raw), 0) + DIMS[arr.ndim].pack(*arr.shape)
        )
        parts.append(raw)
    return b"".join(parts)


def _payloads(arrays: Mapping[str, np.ndarray]) -> list[Any]:
    out = []
    for name, arr in arrays.items():
        if not arr.flags.c_contiguous:
            raise ValueError(f"array {name!r} is not C-contiguous")
        out.append(arr.data.cast("B") if arr.ndim else arr.tobytes())
    return out


def encode_predict(
    simulation_id: int,
    request_id: int,
    timeout_ms: int,
    run_id: str | None,
    arrays: Mapping[str, np.ndarray],
) -> list[Any]:
    """The frames of a PREDICT: its header, then each array's bytes (C-contiguous,
    little-endian arrays of allowed dtypes; ValueError otherwise)."""
    if not 1 <= len(arrays) <= MAX_PREDICT_ARRAYS:
        raise ValueError(f"a prediction request carries 1 to {MAX_PREDICT_ARRAYS} arrays")
    run = b"" if run_id is None else check_run_id(run_id, "run_id").encode()
    head = PREFIX.pack(MAGIC, VERSION, PREDICT, 0, simulation_id) + PREDICT_FIXED.pack(
        request_id, timeout_ms, len(arrays), len(run)
    )
    return [head + run + _arrays_header(arrays), *_payloads(arrays)]


def encode_prediction(
    simulation_id: int, request_id: int, version: int, arrays: Mapping[str, np.ndarray]
) -> list[Any]:
    """The frames of a PREDICTION (as `encode_predict`)."""
    if not 1 <= len(arrays) <= MAX_PREDICT_ARRAYS:
        raise ValueError(f"a prediction carries 1 to {MAX_PREDICT_ARRAYS} arrays")
    head = PREFIX.pack(MAGIC, VERSION, PREDICTION, 0, simulation_id) + PREDICTION_FIXED.pack(
        request_id, version, len(arrays), 0
    )
    return [head + _arrays_header(arrays), *_payloads(arrays)]


def encode_refused(
    simulation_id: int,
    request_id: int,
    version: int,
    reason: str,
    detail: str = "",
    retry_after_ms: int = 0,
) -> bytes:
    """The one frame of a REFUSED (`reason`: a name of `REFUSAL_REASONS`)."""
    text = detail.encode()[:MAX_DETAIL_BYTES]
    return (
        PREFIX.pack(MAGIC, VERSION, REFUSED, 0, simulation_id)
        + REFUSED_FIXED.pack(
            request_id, version, REFUSAL_CODES[reason], 0, min(retry_after_ms, 2**32 - 1), len(text)
        )
        + text
    )


def peek_request_id(frame: Any) -> int | None:
    """The request id of a PREDICT frame that may be invalid (to refuse it by name), or
    None if its prefix and id are unreadable."""
    if (
        len(frame) >= PREFIX.size + U64.size
        and frame[: len(MAGIC)] == MAGIC
        and frame[KIND_AT] == PREDICT
    ):
        return int(U64.unpack_from(frame, PREFIX.size)[0])
    return None


def _prefix(frame: Any, kinds: tuple[int, ...]) -> tuple[int, int]:
    size = len(frame)
    if size < PREFIX.size:
        raise ProtocolError(
            "truncated", f"{size} bytes, shorter than the {PREFIX.size}-byte prefix"
        )
    magic, version, kind, _, sim = PREFIX.unpack_from(frame)
    if magic != MAGIC:
        raise ProtocolError("bad_magic", f"magic {bytes(magic)!r} is not {MAGIC!r}")
    if version != VERSION:
        raise ProtocolError("bad_version", f"version {version}, this side speaks {VERSION}")
    if kind not in kinds:
        raise ProtocolError("bad_kind", f"message kind {kind} on the serving channel")
    return kind, sim


def _arrays(frames: Sequence[Any], at: int, count: int, max_bytes: int) -> dict[str, np.ndarray]:
    """The `count` arrays described from byte `at` of frames[0], whose payloads are
    frames[1:]; every rule checked before an array is built."""
    head = frames[0]
    size = len(head)
    specs: list[tuple[str, np.dtype, tuple[int, ...]]] = []
    total = 0
    for _ in range(count):
        if size < at + ARRAY_FIXED.size:
            raise ProtocolError("truncated", f"array description cut at byte {size}")
        code, ndim, name_len, _ = ARRAY_FIXED.unpack_from(head, at)
        at += ARRAY_FIXED.size
        dtype = DTYPES.get(code)
        if dtype is None:
            raise ProtocolError("bad_dtype", f"dtype code {code} is not in the allow-list")
        if ndim > MAX_NDIM:
            raise ProtocolError("bad_shape", f"{ndim} dimensions, at most {MAX_NDIM}")
        end = at + DIM_BYTES * ndim + name_len
        if size < end:
            raise ProtocolError("truncated", f"array description needs {end} bytes, got {size}")
        shape = DIMS[ndim].unpack_from(head, at)
        if not all(1 <= d < U64_LIMIT for d in shape):
            raise ProtocolError("bad_shape", f"shape {shape}: dimensions must be >= 1")
        try:
            name = bytes(head[at + DIM_BYTES * ndim : end]).decode()
        except UnicodeDecodeError:
            raise ProtocolError("bad_name", "array name is not UTF-8") from None
        if not name:
            raise ProtocolError("bad_name", "empty array name")
        if any(name == s[0] for s in specs):
            raise ProtocolError("bad_request", f"array {name!r} given twice")
        total += math.prod(shape) * dtype.itemsize
        if total > max_bytes:
            raise ProtocolError(
                "too_large",
                f"arrays of more than {max_bytes} bytes (array {name!r} is "
                f"{dtype.str} {tuple(shape)})",
            )
        specs.append((name, dtype, shape))
        at = end
    if at != size:
        raise ProtocolError("bad_size", f"{size - at} bytes after the array descriptions")
    if len(frames) - 1 < count:
        raise ProtocolError("missing_frame", f"{count} arrays, {len(frames) - 1} payload frames")
    if len(frames) - 1 > count:
        raise ProtocolError("unexpected_frame", f"{count} arrays, {len(frames) - 1} payload frames")
    arrays = {}
    for (name, dtype, shape), payload in zip(specs, frames[1:], strict=True):
        nbytes = math.prod(shape) * dtype.itemsize
        if len(payload) != nbytes:
            raise ProtocolError(
                "bad_size", f"array {name!r}: {len(payload)} bytes, expected {nbytes}"
            )
        arrays[name] = np.frombuffer(payload, dtype).reshape(shape)
    return arrays


def decode_predict(frames: Sequence[Any], max_bytes: int) -> PredictRequest:
    """Parse and validate a PREDICT (its header frame, then its payload frames); the
    arrays' bytes add up to at most `max_bytes`.

    Raises:
        ProtocolError: the request breaks section 16 (its `reason` says which rule).
    """
    if not frames:
        raise ProtocolError("truncated", "no frame")
    head = frames[0]
    _, sim = _prefix(head, (PREDICT,))
    fixed_end = PREFIX.size + PREDICT_FIXED.size
    if len(head) < fixed_end:
        raise ProtocolError("truncated", f"PREDICT header of {len(head)} bytes")
    request_id, timeout_ms, count, run_len = PREDICT_FIXED.unpack_from(head, PREFIX.size)
    if count == 0:
        raise ProtocolError("bad_request", "a PREDICT carries at least one array")
    if len(head) < fixed_end + run_len:
        raise ProtocolError("truncated", f"PREDICT header of {len(head)} bytes")
    run_id = None
    if run_len:
        try:
            run_id = check_run_id(bytes(head[fixed_end : fixed_end + run_len]).decode(), "run id")
        except (UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError("bad_request", f"run id: {exc}"[:200]) from None
    arrays = _arrays(frames, fixed_end + run_len, count, max_bytes)
    return PredictRequest(sim, request_id, timeout_ms, run_id, arrays)


def decode_reply(frames: Sequence[Any], max_bytes: int) -> Prediction | Refusal:
    """Parse and validate a PREDICTION or a REFUSED (the client's side).

    Raises:
        ProtocolError: the reply breaks section 16.
    """
    if not frames:
        raise ProtocolError("truncated", "no frame")
    head = frames[0]
    kind, sim = _prefix(head, (PREDICTION, REFUSED))
    if kind == REFUSED:
        fixed_end = PREFIX.size + REFUSED_FIXED.size
        if len(head) < fixed_end:
            raise ProtocolError("truncated", f"REFUSED of {len(head)} bytes")
        request_id, version, code, _, retry, length = REFUSED_FIXED.unpack_from(head, PREFIX.size)
        if len(head) != fixed_end + length:
            raise ProtocolError("bad_size", f"REFUSED of {len(head)} bytes, detail of {length}")
        if len(frames) > 1:
            raise ProtocolError("unexpected_frame", "REFUSED has one frame")
        if code not in REFUSAL_REASONS:
            raise ProtocolError("bad_request", f"unknown refusal code {code}")
        detail = bytes(head[fixed_end:]).decode(errors="replace")
        return Refusal(sim, request_id, version, REFUSAL_REASONS[code], retry, detail)
    fixed_end = PREFIX.size + PREDICTION_FIXED.size
    if len(head) < fixed_end:
        raise ProtocolError("truncated", f"PREDICTION header of {len(head)} bytes")
    request_id, version, count, _ = PREDICTION_FIXED.unpack_from(head, PREFIX.size)
    if count == 0:
        raise ProtocolError("bad_request", "a PREDICTION carries at least one array")
    return Prediction(sim, request_id, version, _arrays(frames, fixed_end, count, max_bytes))
