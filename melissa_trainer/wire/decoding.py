"""Decoding: `decode` parses and validates one message (magic, version, kind, sizes,
dtype, shape, range, rank: everything one message can tell) and raises `ProtocolError`
with a short machine-readable `reason`; the receiver checks the rest against the HELLO.
`peek_simulation_id` reads the id of a message that may be invalid. Standard library
and numpy.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from melissa_trainer.wire.checks import check_run_id
from melissa_trainer.wire.layout import (
    ABANDON,
    BATCH,
    BYE,
    BYE_FIXED,
    CLIENT_KINDS,
    DATA,
    DATA_HEADER_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DIM_BYTES,
    DIMS,
    DTYPES,
    FLAG_FINITE,
    FLAG_INLINE,
    FLAG_REPLACED,
    HELLO,
    HELLO_DTYPES,
    HELLO_FIXED,
    KIND_NAMES,
    MAGIC,
    MAX_HELLO_BYTES,
    MAX_NAME_BYTES,
    MAX_NDIM,
    PREFIX,
    SIMULATION_ID_AT,
    U64,
    U64_LIMIT,
    VERSION,
)
from melissa_trainer.wire.messages import (
    Abandon,
    Batch,
    Bye,
    Data,
    FieldSpec,
    Hello,
    Message,
    ProtocolError,
)
from melissa_trainer.wire.routing import ROUTINGS
from melissa_trainer.wire.study_end import STUDY_END, decode_study_end

_DATA_HEAD = struct.Struct("<4sBBHQQHHBBBBQQ")  # PREFIX + DATA_FIXED, unpacked at once


def peek_simulation_id(frame: Any) -> int | None:
    """The simulation id of a message that may be invalid (for the logs and counters of
    a rejected message), or None if its prefix is unreadable."""
    if len(frame) >= PREFIX.size and frame[: len(MAGIC)] == MAGIC:
        return int(U64.unpack_from(frame, SIMULATION_ID_AT)[0])
    return None


def decode(
    frame: Any, payload: Any = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Message:
    """Parse and validate one message.

    Args:
        frame: the first frame (bytes or a buffer).
        payload: the second frame's buffer for a non-inline DATA, else None.
        max_message_bytes: bound on header plus payload.

    Raises:
        ProtocolError: the message breaks the protocol (its `reason` says which rule).
    """
    size = len(frame)
    if size >= DATA_HEADER_BYTES:  # the hot path: DATA, prefix and fixed part at once
        head = _DATA_HEAD.unpack_from(frame)
        if head[0] == MAGIC and head[1] == VERSION:
            if head[2] == DATA:
                return _decode_data(frame, size, head, payload, max_message_bytes)
            if head[2] == BATCH:
                if payload is not None:
                    raise ProtocolError("unexpected_frame", "BATCH has one frame")
                return _decode_batch(frame, size, head, max_message_bytes)
    if size < PREFIX.size:
        raise ProtocolError(
            "truncated", f"{size} bytes, shorter than the {PREFIX.size}-byte prefix"
        )
    magic, version, kind, flags, sim = PREFIX.unpack_from(frame)
    if magic != MAGIC:
        raise ProtocolError("bad_magic", f"magic {bytes(magic)!r} is not {MAGIC!r}")
    if version != VERSION:
        raise ProtocolError("bad_version", f"version {version}, this receiver speaks {VERSION}")
    if kind in (DATA, BATCH):
        raise ProtocolError("truncated", f"{KIND_NAMES[kind]} header of {size} bytes")
    if payload is not None:
        raise ProtocolError("unexpected_frame", f"{KIND_NAMES.get(kind, kind)} has one frame")
    if kind == HELLO:
        return _decode_hello(frame, size, sim)
    if kind == BYE:
        if size != PREFIX.size + BYE_FIXED.size:
            raise ProtocolError("bad_size", f"BYE of {size} bytes")
        rank, count, steps = BYE_FIXED.unpack_from(frame, PREFIX.size)
        _check_rank(rank, count)
        return Bye(sim, rank, count, steps)
    if kind == ABANDON:
        if size != PREFIX.size:
            raise ProtocolError("bad_size", f"ABANDON of {size} bytes")
        return Abandon(sim, bool(flags & FLAG_REPLACED))
    if kind == STUDY_END:  # (its ids' count in the simulation-id field)
        return decode_study_end(frame, size, sim, max_message_bytes)
    raise ProtocolError("bad_kind", f"unknown message kind {kind}")


def _check_rank(rank: int, count: int) -> None:
    if count < 1 or rank >= count:
        raise ProtocolError("bad_rank", f"client rank {rank} of {count}")


_NAMES: dict[bytes, str] = {}  # decoded field names (a client sends few names, often)


def _decode_data(frame: Any, size: int, head: tuple, payload: Any, max_bytes: int) -> Data:
    flags, sim, step, rank, ranks = head[3:8]
    offset, count = head[12:14]
    name, dtype, shape, header_end = _data_header(frame, size, head, max_bytes)
    nbytes = count * dtype.itemsize
    if flags & FLAG_INLINE:
        if payload is not None:
            raise ProtocolError("unexpected_frame", "INLINE DATA with a second frame")
        if size - header_end != nbytes:
            raise ProtocolError("bad_size", f"{size - header_end} payload bytes, expected {nbytes}")
        body: Any = memoryview(frame)[header_end:]
    else:
        if size != header_end:
            raise ProtocolError("bad_size", "bytes after a DATA header without INLINE")
        if payload is None:
            raise ProtocolError("missing_frame", "DATA without INLINE needs a payload frame")
        if len(payload) != nbytes:
            raise ProtocolError("bad_size", f"{len(payload)} payload bytes, expected {nbytes}")
        body = payload
    finite = bool(flags & FLAG_FINITE)
    return Data(sim, step, rank, ranks, name, dtype, shape, offset, count, body, finite)


def _decode_batch(frame: Any, size: int, head: tuple, max_bytes: int) -> Batch:
    flags, sim, records, rank, ranks = head[3:8]
    offset, count = head[12:14]
    name, dtype, shape, header_end = _data_header(frame, size, head, max_bytes)
    stride = U64.size + count * dtype.itemsize
    if records == 0 or size - header_end != records * stride:
        raise ProtocolError(
            "bad_size", f"BATCH of {records} records of {stride} bytes in {size - header_end}"
        )
    steps = np.ndarray((records,), "<u8", frame, header_end, (stride,))
    payloads = np.ndarray(
        (records, count), dtype, frame, header_end + U64.size, (stride, dtype.itemsize)
    )
    finite = bool(flags & FLAG_FINITE)
    return Batch(
        sim, records, rank, ranks, name, dtype, shape, offset, count, steps, payloads, finite
    )


def _data_header(
    frame: Any, size: int, head: tuple, max_bytes: int
) -> tuple[str, np.dtype, tuple[int, ...], int]:
    """Validate the part of a DATA or BATCH header after the time step / record count;
    return the field name, dtype, global shape and the header's length."""
    rank, ranks, code, ndim, name_len, _, offset, count = head[6:]
    if ranks < 1 or rank >= ranks:
        raise ProtocolError("bad_rank", f"client rank {rank} of {ranks}")
    dtype = DTYPES.get(code)
    if dtype is None:
        raise ProtocolError("bad_dtype", f"dtype code {code} is not in the allow-list")
    if ndim > MAX_NDIM:
        raise ProtocolError("bad_shape", f"{ndim} dimensions, at most {MAX_NDIM}")
    shape_end = DATA_HEADER_BYTES + DIM_BYTES * ndim
    header_end = shape_end + name_len
    if size < header_end:
        raise ProtocolError("truncated", f"DATA header needs {header_end} bytes, got {size}")
    shape = DIMS[ndim].unpack_from(frame, DATA_HEADER_BYTES)
    elements = 1
    for d in shape:
        elements *= d
    if elements * dtype.itemsize > max_bytes:
        raise ProtocolError("too_large", f"field of shape {shape} exceeds {max_bytes} bytes")
    if count == 0 or offset + count > elements:
        raise ProtocolError(
            "bad_range", f"elements [{offset}, {offset + count}) of a field of {elements}"
        )
    raw_name = bytes(frame[shape_end:header_end])
    name = _NAMES.get(raw_name)
    if name is None:
        try:
            name = raw_name.decode()
        except UnicodeDecodeError:
            raise ProtocolError("bad_name", "field name is not UTF-8") from None
        if len(_NAMES) < 4096:  # bounded: garbage names must not grow it forever
            _NAMES[raw_name] = name
    return name, dtype, shape, header_end


def _decode_hello(frame: Any, size: int, sim: int) -> Hello:
    fixed_end = PREFIX.size + HELLO_FIXED.size
    if size < fixed_end:
        raise ProtocolError("truncated", f"HELLO of {size} bytes")
    rank, ranks, body_len = HELLO_FIXED.unpack_from(frame, PREFIX.size)
    _check_rank(rank, ranks)
    if body_len > MAX_HELLO_BYTES or size != fixed_end + body_len:
        raise ProtocolError(
            "bad_size", f"HELLO body of {size - fixed_end} bytes, header says {body_len}"
        )
    try:
        body = json.loads(bytes(frame[fixed_end:]).decode())
        specs = tuple(_field_spec(f) for f in body["fields"])
        parameters = {k: _number(v) for k, v in body.get("parameters", {}).items()}
        run_id = body.get("run_id")
        if run_id is not None:
            check_run_id(run_id, "HELLO run_id")
        # informational (what the launcher's advice says depends on it): an unknown or
        # unreadable value is "did not say", never a reason to refuse the HELLO
        client = body.get("client")
        client = client if client in CLIENT_KINDS else None
        routing = body.get("routing")
        if routing is not None and routing not in ROUTINGS:
            # (which of this simulation's steps are whose would be guessed wrong)
            raise ValueError(f"routing {routing!r} unknown here (known: {ROUTINGS})")
    except Exception as exc:  # untrusted input: json and numpy raise ValueError, TypeError,
        # KeyError, AttributeError, OverflowError ([Infinity], 1e400 as an integer),
        # RecursionError (deep nesting), even SyntaxError (np.dtype("|,)61"))
        raise ProtocolError("bad_hello", f"unreadable HELLO body: {exc!r}"[:300]) from None
    if not specs or len({s.name for s in specs}) != len(specs):
        raise ProtocolError("bad_hello", "HELLO must declare at least one field, names unique")
    return Hello(sim, rank, ranks, specs, parameters, run_id, client, routing)


def _field_spec(entry: dict[str, Any]) -> FieldSpec:
    """A HELLO body's field entry, held to docs/protocol.md section 6 as written: JSON
    types are not converted (a shape of 2.5 or "2", a name 5, a dtype "float32" are
    errors, not 2, "5" and float32), so what is accepted is what the document allows."""
    name, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
    if type(name) is not str or not name or len(name.encode()) > MAX_NAME_BYTES:
        raise ValueError(f"field name {name!r} must be a string of 1 to {MAX_NAME_BYTES} bytes")
    if type(dtype) is not str or dtype not in HELLO_DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(HELLO_DTYPES)}")
    if type(shape) is not list or len(shape) > MAX_NDIM:
        raise ValueError(f"shape {shape!r} is not a list of at most {MAX_NDIM} integers")
    if not all(type(d) is int and 1 <= d < U64_LIMIT for d in shape):
        raise ValueError(f"shape {shape!r}: dimensions are integers in [1, 2^64)")
    return FieldSpec(name, HELLO_DTYPES[dtype], tuple(shape))


def _number(value: Any) -> float:
    """A HELLO parameter: a JSON number (not a string, a boolean or null) as a float.
    Finiteness is the receiver's check (`assembly.check_hello`)."""
    if type(value) not in (int, float):
        raise TypeError(f"parameter {value!r} is not a number")
    return float(value)
