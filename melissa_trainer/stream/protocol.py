"""The wire protocol between simulations and the trainer (version 2).

Language-neutral and pickle-free: fixed-layout little-endian binary headers (Python
`struct`), JSON only for the once-per-simulation HELLO, raw array bytes. The full
specification, precise enough to write a C or Fortran client, is `docs/protocol.md`;
this module is its reference implementation. It imports only the standard library and
numpy, so that simulations can use it without torch.

Message kinds:

* HELLO (one per client rank, before its data): the fields it will send (name, dtype,
  global shape), the simulation's parameters, its rank and rank count, and optionally
  the run id it belongs to (a receiver of another run refuses it; absent: unchecked,
  as older clients send it).
* DATA (one per field, time step and client rank): this rank's contiguous part of the
  field, as a flat element range `[offset, offset + count)` of the C-ordered global
  array. The bytes follow the header in the same ZeroMQ frame (INLINE flag, cheap for
  small messages) or come as a second frame (received without a copy, for large ones).
  The FINITE flag (DATA and BATCH) says that the sender checked every value finite,
  so that the receiver need not read the payload to check it again.
* BYE (one per client rank and receiver, after its data): how many time steps it sent
  to that receiver (version 2; version 1 counted them over all receivers, which tied
  the end of a simulation to steps numbered 0, 1, 2... with several receivers).
* BATCH (one frame): several time steps of one field of one client rank, each an
  8-byte time step followed by the payload; what DATA carries, with the header paid
  once. The client coalesces small messages into batches (a receiver then handles a
  batch of whole single-field samples as arrays, not message by message).
* ABANDON (from the launcher, to every receiver): a simulation will send nothing more
  and must not be waited for (it failed for good); what it sent stays.

`decode` validates everything that can be checked from one message (magic, version,
kind, sizes, dtype, shape, range, rank) and raises `ProtocolError` with a short
machine-readable `reason`; the receiver checks the rest against the HELLO.

The wire layout lives here only: the client's prebuilt headers, the receiver's peeks
at a frame's kind and flags and the inline decoder's memo key use the `*_AT` offsets
and `U64` below, never literal offsets. `field_specs` checks a field declaration the
same way on both sides. (Over 400 lines: the wire format's one home, kept whole.)
"""

from __future__ import annotations

import json
import math
import operator
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

MAGIC = b"MTRN"
VERSION = 2

HELLO, DATA, BYE, ABANDON, BATCH = 1, 2, 3, 4, 5
KIND_NAMES = {HELLO: "HELLO", DATA: "DATA", BYE: "BYE", ABANDON: "ABANDON", BATCH: "BATCH"}

#: DATA flag: the payload follows the header in the same frame.
FLAG_INLINE = 0x1
#: DATA and BATCH flag: the sender checked that every value of the payload (of every
#: record, in a BATCH) is finite (no NaN, no Inf); set on floating-point fields only, and
#: only when that check passed. A fact about the payload, not a policy: a receiver may
#: skip its own check of a field whose every part carries it (`nonfinite`); a message
#: without it is checked. Bit 1, which version-2 receivers before it ignore (they check
#: as for any message): no new version (docs/protocol.md, section 13).
FLAG_FINITE = 0x2
#: ABANDON flag: the launcher redraws a replacement (receivers wait for it instead)
FLAG_REPLACED = 0x1

MAX_NDIM = 8
MAX_NAME_BYTES = 255
#: Default bound on one message (header + payload), in bytes.
DEFAULT_MAX_MESSAGE_BYTES = 1 << 30
MAX_HELLO_BYTES = 1 << 20
#: Client rank counts are u16 on the wire.
MAX_CLIENT_RANKS = (1 << 16) - 1
#: Longest run id (HELLO's optional ``run_id``); letters, digits, ``-`` and ``_`` only.
MAX_RUN_ID_CHARS = 64
#: Names a field may not have: the receiver adds these entries to every sample.
RESERVED_NAMES = frozenset({"simulation_id", "time_step", "parameters"})

#: dtype code on the wire -> numpy dtype (little-endian). The allow-list.
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<f2"),
    4: np.dtype("<i1"),
    5: np.dtype("<i2"),
    6: np.dtype("<i4"),
    7: np.dtype("<i8"),
    8: np.dtype("<u1"),
    9: np.dtype("<u2"),
    10: np.dtype("<u4"),
    11: np.dtype("<u8"),
    12: np.dtype("?"),
}
DTYPE_CODES: dict[np.dtype, int] = {dt: code for code, dt in DTYPES.items()}
#: a HELLO's dtype strings (numpy's ``dtype.str``): exactly these, no alias ("float32")
HELLO_DTYPES: dict[str, np.dtype] = {dt.str: dt for dt in DTYPES.values()}

# magic, version, kind, flags, simulation id
PREFIX = struct.Struct("<4sBBHQ")
# time step, client rank, client count, dtype code, ndim, name length, reserved, offset, count
DATA_FIXED = struct.Struct("<QHHBBBBQQ")
DATA_HEADER_BYTES = PREFIX.size + DATA_FIXED.size  # 48; then ndim x u64 shape, then name
_DATA_HEAD = struct.Struct("<4sBBHQQHHBBBBQQ")  # PREFIX + DATA_FIXED, unpacked at once
# client rank, client count, JSON length
HELLO_FIXED = struct.Struct("<HHI")
# client rank, client count, steps sent
BYE_FIXED = struct.Struct("<HHQ")
_DIMS = [struct.Struct(f"<{n}Q") for n in range(MAX_NDIM + 1)]
#: A u64: DATA's time step, BATCH's record count (in the same slot), each BATCH
#: record's leading time step. Use its bound methods (`U64.pack`) on hot paths.
U64 = struct.Struct("<Q")

# Byte offsets of the header fields read without a full `decode` (hot paths peek at
# one byte or slice around the time step); the tests check them against the Structs.
#: The message kind (u8).
KIND_AT = struct.calcsize("<4sB")
#: The flags (u16; FLAG_INLINE is in its low byte, read as ``frame[FLAGS_AT]``).
FLAGS_AT = struct.calcsize("<4sBB")
#: The simulation id (u64), in every message.
SIMULATION_ID_AT = struct.calcsize("<4sBBH")
#: DATA's time step (u64), where BATCH has its record count (`RECORDS_AT`).
TIME_STEP_AT = PREFIX.size
RECORDS_AT = TIME_STEP_AT
#: The first byte after the time step of DATA and BATCH (the client rank).
AFTER_TIME_STEP_AT = TIME_STEP_AT + U64.size
#: The number of dimensions (u8) of DATA and BATCH; ndim x u64 dims follow the fixed part.
NDIM_AT = PREFIX.size + struct.calcsize("<QHHB")
#: The field name's length in bytes (u8) of DATA and BATCH; the name follows the dims.
NAME_LEN_AT = NDIM_AT + 1
#: Bytes per dimension in a DATA or BATCH header.
DIM_BYTES = U64.size
#: Every u64 on the wire (ids, time steps, dimensions) is below this.
U64_LIMIT = 1 << 64


class ProtocolError(ValueError):
    """A message that breaks the protocol; `reason` names the rule (for counters)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class FieldSpec:
    """A field as declared in HELLO: name, dtype and global shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # exact (np.prod in int64 wraps around silently)


@dataclass(frozen=True)
class Hello:
    simulation_id: int
    client_rank: int
    client_count: int
    fields: tuple[FieldSpec, ...]
    parameters: dict[str, float] = field(default_factory=dict)
    #: the run the client belongs to (None: it did not say, as older clients)
    run_id: str | None = None


class Data(NamedTuple):
    """One DATA message (a tuple: cheap to build at hundreds of thousands per second)."""

    simulation_id: int
    time_step: int
    client_rank: int
    client_count: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    elements: int  # the wire's `count` (not `count`: that is a tuple method)
    payload: Any  # a buffer of elements * itemsize bytes (a view of the frame: no copy)
    finite: bool = False  # FLAG_FINITE: the sender found every value finite


class Batch(NamedTuple):
    """One BATCH message: `records` time steps of one field part of one client rank."""

    simulation_id: int
    records: int
    client_rank: int
    client_count: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    elements: int
    steps: np.ndarray  # (records,) little-endian u64, a strided view of the frame
    payloads: np.ndarray  # (records, elements) of `dtype`, a strided view of the frame
    finite: bool = False  # FLAG_FINITE: the sender found every record's values finite

    def record(self, i: int) -> Data:
        """Record `i` as the DATA message it stands for (the slow, general path)."""
        payload = self.payloads[i]
        return Data(
            self.simulation_id,
            int(self.steps[i]),
            self.client_rank,
            self.client_count,
            self.name,
            self.dtype,
            self.shape,
            self.offset,
            self.elements,
            payload,
            self.finite,
        )


@dataclass(frozen=True)
class Bye:
    simulation_id: int
    client_rank: int
    client_count: int
    steps_sent: int  #: distinct time steps this client rank sent to the receiving end


@dataclass(frozen=True)
class Abandon:
    simulation_id: int
    replaced: bool = False


Message = Hello | Data | Batch | Bye | Abandon


# -- encoding -------------------------------------------------------------------------


def encode_hello(
    simulation_id: int,
    client_rank: int,
    client_count: int,
    fields: list[FieldSpec] | tuple[FieldSpec, ...],
    parameters: dict[str, float] | None = None,
    run_id: str | None = None,
) -> bytes:
    """The HELLO frame; `run_id` (checked by `check_run_id`) goes last in the body,
    only when given (a body without it is byte for byte what older clients send)."""
    content: dict[str, Any] = {
        "fields": [{"name": f.name, "dtype": f.dtype.str, "shape": list(f.shape)} for f in fields],
        "parameters": {str(k): float(v) for k, v in (parameters or {}).items()},
    }
    if run_id is not None:
        content["run_id"] = check_run_id(run_id, "run_id")
    body = json.dumps(content).encode()
    return (
        PREFIX.pack(MAGIC, VERSION, HELLO, 0, simulation_id)
        + HELLO_FIXED.pack(client_rank, client_count, len(body))
        + body
    )


def encode_data_header(
    simulation_id: int,
    time_step: int,
    client_rank: int,
    client_count: int,
    name: bytes,
    dtype_code: int,
    shape: tuple[int, ...],
    offset: int,
    count: int,
    inline: bool,
    finite: bool = False,
) -> bytes:
    """The DATA header; `name` is the field name, UTF-8 encoded (<= 255 bytes);
    `finite`: set FLAG_FINITE (only for a payload whose every value was checked finite)."""
    flags = (FLAG_INLINE if inline else 0) | (FLAG_FINITE if finite else 0)
    return (
        PREFIX.pack(MAGIC, VERSION, DATA, flags, simulation_id)
        + DATA_FIXED.pack(
            time_step,
            client_rank,
            client_count,
            dtype_code,
            len(shape),
            len(name),
            0,
            offset,
            count,
        )
        + _DIMS[len(shape)].pack(*shape)
        + name
    )


def encode_batch_header(
    simulation_id: int,
    records: int,
    client_rank: int,
    client_count: int,
    name: bytes,
    dtype_code: int,
    shape: tuple[int, ...],
    offset: int,
    count: int,
) -> bytes:
    """The BATCH header (the DATA header with kind 5 and `records` in place of the
    time step); `records` x (u64 time step + payload) follow it."""
    return batch_header_of(
        encode_data_header(
            simulation_id,
            records,
            client_rank,
            client_count,
            name,
            dtype_code,
            shape,
            offset,
            count,
            False,
        )
    )


def batch_header_of(data_header: bytes) -> bytes:
    """The BATCH header of the same field part as a DATA header (its time step field
    becomes the record count; flags cleared: a sender sets FLAG_FINITE on the batch it
    checked, `with_finite_flag`)."""
    return data_header[:KIND_AT] + bytes([BATCH]) + b"\0\0" + data_header[SIMULATION_ID_AT:]


def with_finite_flag(header: bytes) -> bytes:
    """A DATA or BATCH header (or its bytes before the time step) with FLAG_FINITE set."""
    return header[:FLAGS_AT] + bytes([header[FLAGS_AT] | FLAG_FINITE]) + header[FLAGS_AT + 1 :]


def split_at_time_step(data_header: bytes) -> tuple[bytes, bytes]:
    """A DATA header's bytes before and after its time step: a sender prebuilds them
    once and sends ``head + U64.pack(step) + tail`` at each step."""
    return data_header[:TIME_STEP_AT], data_header[AFTER_TIME_STEP_AT:]


def peek_simulation_id(frame: Any) -> int | None:
    """The simulation id of a message that may be invalid (for the logs and counters of
    a rejected message), or None if its prefix is unreadable."""
    if len(frame) >= PREFIX.size and frame[: len(MAGIC)] == MAGIC:
        return int(U64.unpack_from(frame, SIMULATION_ID_AT)[0])
    return None


def encode_bye(simulation_id: int, client_rank: int, client_count: int, steps_sent: int) -> bytes:
    return PREFIX.pack(MAGIC, VERSION, BYE, 0, simulation_id) + BYE_FIXED.pack(
        client_rank, client_count, steps_sent
    )


def encode_abandon(simulation_id: int, replaced: bool = False) -> bytes:
    return PREFIX.pack(MAGIC, VERSION, ABANDON, FLAG_REPLACED if replaced else 0, simulation_id)


# -- decoding -------------------------------------------------------------------------


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
    shape = _DIMS[ndim].unpack_from(frame, DATA_HEADER_BYTES)
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
    except Exception as exc:  # untrusted input: json and numpy raise ValueError, TypeError,
        # KeyError, AttributeError, OverflowError ([Infinity], 1e400 as an integer),
        # RecursionError (deep nesting), even SyntaxError (np.dtype("|,)61"))
        raise ProtocolError("bad_hello", f"unreadable HELLO body: {exc!r}"[:300]) from None
    if not specs or len({s.name for s in specs}) != len(specs):
        raise ProtocolError("bad_hello", "HELLO must declare at least one field, names unique")
    return Hello(sim, rank, ranks, specs, parameters, run_id)


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
            raise ValueError(f"field {name!r}: {dtype!r} is not a dtype") from None
        except ValueError as exc:
            raise ValueError(f"field {name!r}: {exc}") from None
        specs.append(FieldSpec(name, DTYPES[code], dims))
    if not specs:
        raise ValueError("declare at least one field")
    if len({s.name for s in specs}) != len(specs):
        raise ValueError(f"field names must be unique: {[s.name for s in specs]}")
    return specs
