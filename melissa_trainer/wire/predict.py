"""The serving channel (docs/protocol.md, section 16): a simulation asks the trainer's
current model for a prediction (PREDICT) and gets the arrays with the model's version
(PREDICTION) or a refusal it can act on (REFUSED). Standard library and numpy.

A PREDICT or PREDICTION is a header frame, describing named arrays (dtype code, shape,
name, as in a DATA header: `predict_describe`'s `pack_descriptions` and
`read_descriptions`, shared with a DESCRIPTION), followed by one payload frame per
array, its raw little-endian C-ordered bytes: no pickle, no JSON on the per-request
path. A REFUSED is one frame. `decode_predict` (the trainer's side) and `decode_reply`
(the client's; `decode_answer` also takes a DESCRIPTION) validate everything before any
array is built, and raise `ProtocolError` with a `reason` of section 10's table, or
``bad_request`` for the header's own rules.

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
    KIND_AT,
    MAGIC,
    MAX_PREDICT_ARRAYS,
    PREDICT,
    PREDICT_FIXED,
    PREDICTION,
    PREDICTION_FIXED,
    PREFIX,
    REFUSED,
    REFUSED_FIXED,
    U64,
    VERSION,
)
from melissa_trainer.wire.messages import ProtocolError
from melissa_trainer.wire.predict_describe import (
    FLAG_DESCRIBE,
    Description,
    decode_description,
    pack_descriptions,
    read_descriptions,
)

__all__ = [
    "REFUSAL_CODES",
    "REFUSAL_REASONS",
    "PredictRequest",
    "Prediction",
    "Refusal",
    "decode_answer",
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


def _described(arrays: Mapping[str, np.ndarray]) -> bytes:
    return pack_descriptions((name, arr.dtype, arr.shape) for name, arr in arrays.items())


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
    return [head + run + _described(arrays), *_payloads(arrays)]


def encode_prediction(
    simulation_id: int, request_id: int, version: int, arrays: Mapping[str, np.ndarray]
) -> list[Any]:
    """The frames of a PREDICTION (as `encode_predict`)."""
    if not 1 <= len(arrays) <= MAX_PREDICT_ARRAYS:
        raise ValueError(f"a prediction carries 1 to {MAX_PREDICT_ARRAYS} arrays")
    head = PREFIX.pack(MAGIC, VERSION, PREDICTION, 0, simulation_id) + PREDICTION_FIXED.pack(
        request_id, version, len(arrays), 0
    )
    return [head + _described(arrays), *_payloads(arrays)]


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
    specs = read_descriptions(frames[0], at, count, max_bytes=max_bytes)
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


def decode_answer(frames: Sequence[Any], max_bytes: int) -> Description | Prediction | Refusal:
    """A reply on the serving channel (the client's side): a DESCRIPTION (its flags
    `FLAG_DESCRIBE`: `decode_description`), else a PREDICTION or a REFUSED
    (`decode_reply`, bounded by `max_bytes`).

    Raises:
        ProtocolError: the reply breaks section 16.
    """
    head = frames[0] if frames else b""
    if len(head) < PREFIX.size or PREFIX.unpack_from(head)[3] != FLAG_DESCRIBE:
        return decode_reply(frames, max_bytes)
    return decode_description(frames)
