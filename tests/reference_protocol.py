"""A second reading of docs/protocol.md, written from the document alone, for the fuzz test.

`tests/stream/test_fuzz.py` sends mutated and valid messages to a real `Receiver` and asks
this module (the decoder) and `reference_receiver` (the receiver's rules) what the
document says must happen to each: accepted (and which samples reach the buffer, with
which bytes) or rejected (and for which reason). They were written without reading
`melissa_trainer/wire/` or the receiver's code, so that a message the
library accepts wrongly (or decodes into other values) can be caught. Where the
document turned out silent or wrong, the document was made precise first, then this.

Where the document is silent about a message (for example a new time step of a
simulation that has finished), the reference raises `Unspecified` and the test does
not send it: the fuzz checks only what the document promises. Section numbers below
are those of docs/protocol.md.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

# section 5: the common prefix
MAGIC = b"MTRN"
VERSION = 2
HELLO, DATA, BYE, ABANDON, BATCH = 1, 2, 3, 4, 5
STUDY_END = 15  # section 8b
INLINE = 0x0001  # DATA flags bit 0
FINITE = 0x0002  # DATA and BATCH flags bit 1: the sender checked every value finite
FLOAT_DTYPES = frozenset({"<f2", "<f4", "<f8"})  # section 9: the IEEE 754 types
REPLACED = 0x0001  # ABANDON flags bit 0
PREFIX_BYTES = 16
# section 6: HELLO fixed part and body bound
HELLO_FIXED_BYTES = 24
HELLO_BODY_MAX = 1 << 20
# section 7: DATA fixed header (before shape and name)
DATA_FIXED_BYTES = 48
MAX_NDIM = 8
BYE_BYTES = 28
ABANDON_BYTES = 16
# section 9: code -> (HELLO string, itemsize)
DTYPES: dict[int, tuple[str, int]] = {
    1: ("<f4", 4),
    2: ("<f8", 8),
    3: ("<f2", 2),
    4: ("|i1", 1),
    5: ("<i2", 2),
    6: ("<i4", 4),
    7: ("<i8", 8),
    8: ("|u1", 1),
    9: ("<u2", 2),
    10: ("<u4", 4),
    11: ("<u8", 8),
    12: ("|b1", 1),
}
CODE_OF = {s: c for c, (s, _) in DTYPES.items()}
# section 6: names a HELLO may not declare (the receiver adds these entries)
RESERVED = frozenset({"simulation_id", "time_step", "parameters"})
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Reject(Exception):
    """The document says the message is dropped and counted under `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unspecified(Exception):
    """The document does not say what happens to this message (it is not sent)."""


@dataclass(frozen=True)
class Field:
    name: str
    dtype: str  # the HELLO string of section 9
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPES[CODE_OF[self.dtype]][1]


@dataclass(frozen=True)
class Hello:
    sim: int
    rank: int
    count: int
    fields: tuple[Field, ...]
    parameters: tuple[tuple[str, float], ...]
    #: section 6's "routing": "simulation_step", or None (absent: steps routed t % W)
    routing: str | None = None


@dataclass(frozen=True)
class Part:
    """The header shared by DATA and BATCH (sections 7, 7a), and one payload per step."""

    sim: int
    rank: int
    count: int
    code: int
    shape: tuple[int, ...]
    name: str
    offset: int
    n: int  # elements in this part
    steps: tuple[int, ...]  # one for a DATA, R for a BATCH
    payloads: tuple[bytes, ...]
    finite: bool = False  # flags bit 1 (FINITE)


@dataclass(frozen=True)
class Bye:
    sim: int
    rank: int
    count: int
    steps_sent: int


@dataclass(frozen=True)
class Abandon:
    sim: int
    replaced: bool


@dataclass(frozen=True)
class StudyEnd:
    sim: int  # (the prefix's field: here the number of ids)
    finished: tuple[int, ...]


Message = Hello | Part | Bye | Abandon | StudyEnd


# -- encoding (what a client sends, section 5 to 8a) ----------------------------------------


def prefix(kind: int, sim: int, flags: int = 0) -> bytes:
    return MAGIC + struct.pack("<BBHQ", VERSION, kind, flags, sim)


def hello_body(fields: list[Field], parameters: dict[str, float]) -> bytes:
    body: dict[str, Any] = {
        "fields": [{"name": f.name, "dtype": f.dtype, "shape": list(f.shape)} for f in fields]
    }
    if parameters:
        body["parameters"] = parameters
    return json.dumps(body).encode()


def encode_hello(sim: int, rank: int, count: int, body: bytes) -> bytes:
    return prefix(HELLO, sim) + struct.pack("<HHI", rank, count, len(body)) + body


def part_header(
    kind: int,
    sim: int,
    first: int,
    rank: int,
    count: int,
    f: Field,
    offset: int,
    n: int,
    inline: bool,
    finite: bool = False,
) -> bytes:
    """A DATA header (`first` = the time step) or a BATCH header (`first` = R); `finite`
    sets FINITE (a sender that checked every value of the payload finite)."""
    name = f.name.encode()
    return (
        prefix(kind, sim, (INLINE if inline else 0) | (FINITE if finite else 0))
        + struct.pack(
            "<QHHBBBBQQ",
            first,
            rank,
            count,
            CODE_OF[f.dtype],
            len(f.shape),
            len(name),
            0,
            offset,
            n,
        )
        + b"".join(struct.pack("<Q", d) for d in f.shape)
        + name
    )


def encode_bye(sim: int, rank: int, count: int, steps_sent: int) -> bytes:
    return prefix(BYE, sim) + struct.pack("<HHQ", rank, count, steps_sent)


def encode_abandon(sim: int, replaced: bool = False) -> bytes:
    return prefix(ABANDON, sim, REPLACED if replaced else 0)


# -- reading ZeroMQ messages and decoding frames (sections 1, 5 to 10) ----------------------


def split(frames: list[bytes]) -> list[tuple[bytes, bytes | None]]:
    """Section 1: the protocol messages a receiver reads in one ZeroMQ message. A frame of
    at least 8 bytes whose kind byte is DATA and whose INLINE bit is clear is a two-frame
    DATA's header: the next frame, if any, is its payload. Every other frame is a
    message of its own."""
    out: list[tuple[bytes, bytes | None]] = []
    i = 0
    while i < len(frames):
        f = frames[i]
        if len(f) >= 8 and f[5] == DATA and not f[6] & INLINE and i + 1 < len(frames):
            out.append((f, frames[i + 1]))
            i += 2
        else:
            out.append((f, None))
            i += 1
    return out


def _u16(b: bytes, at: int) -> int:
    return int.from_bytes(b[at : at + 2], "little")


def _u64(b: bytes, at: int) -> int:
    return int.from_bytes(b[at : at + 8], "little")


def decode(frame: bytes, part: bytes | None, max_bytes: int) -> Message:
    """One protocol message, or `Reject` with the first rule of section 10 it breaks, in
    the order section 10 gives."""
    if len(frame) < PREFIX_BYTES:
        raise Reject("truncated")
    if frame[:4] != MAGIC:
        raise Reject("bad_magic")
    if frame[4] != VERSION:
        raise Reject("bad_version")
    kind, flags, sim = frame[5], _u16(frame, 6), _u64(frame, 8)
    if kind in (DATA, BATCH):
        if len(frame) < DATA_FIXED_BYTES:
            raise Reject("truncated")
        if kind == BATCH and part is not None:
            raise Reject("unexpected_frame")
        p = _part(frame, part, kind, bool(flags & INLINE), sim, max_bytes)
        return _with_finite(p) if flags & FINITE else p
    if part is not None:
        raise Reject("unexpected_frame")
    if kind == HELLO:
        return _hello(frame, sim)
    if kind == BYE:
        if len(frame) != BYE_BYTES:
            raise Reject("bad_size")
        _check_rank(_u16(frame, 16), _u16(frame, 18))
        return Bye(sim, _u16(frame, 16), _u16(frame, 18), _u64(frame, 20))
    if kind == ABANDON:
        if len(frame) != ABANDON_BYTES:
            raise Reject("bad_size")
        return Abandon(sim, bool(flags & REPLACED))
    if kind == STUDY_END:  # section 8b: `sim` is the number of ids that follow
        if sim > (max_bytes - PREFIX_BYTES) // 8:
            raise Reject("too_large")
        if len(frame) != PREFIX_BYTES + 8 * sim:
            raise Reject("bad_size")
        ids = [_u64(frame, PREFIX_BYTES + 8 * i) for i in range(sim)]
        if any(i >= 1 << 63 for i in ids) or any(b <= a for a, b in pairwise(ids)):
            raise Reject("bad_range")
        return StudyEnd(sim, tuple(ids))
    raise Reject("bad_kind")


def _with_finite(p: Part) -> Part:
    """`p` with its FINITE flag (section 5: DATA and BATCH flags bit 1)."""
    return Part(
        p.sim, p.rank, p.count, p.code, p.shape, p.name, p.offset, p.n, p.steps, p.payloads, True
    )


def holds_nonfinite(code: int, payload: bytes) -> bool:
    """Whether a payload of dtype `code` holds NaN or Inf (section 9: IEEE 754 floats;
    the other types cannot)."""
    dtype = DTYPES[code][0]
    if dtype not in FLOAT_DTYPES:
        return False
    return not bool(np.isfinite(np.frombuffer(payload, dtype)).all())


def _check_rank(rank: int, count: int) -> None:
    if count == 0 or rank >= count:
        raise Reject("bad_rank")


def _part(
    frame: bytes, part: bytes | None, kind: int, inline: bool, sim: int, max_bytes: int
) -> Part:
    rank, count = _u16(frame, 24), _u16(frame, 26)
    code, ndim, name_len = frame[28], frame[29], frame[30]
    offset, n = _u64(frame, 32), _u64(frame, 40)
    _check_rank(rank, count)
    if code not in DTYPES:
        raise Reject("bad_dtype")
    if ndim > MAX_NDIM:
        raise Reject("bad_shape")
    head = DATA_FIXED_BYTES + 8 * ndim + name_len
    if len(frame) < head:
        raise Reject("truncated")
    shape = tuple(_u64(frame, 48 + 8 * i) for i in range(ndim))
    itemsize = DTYPES[code][1]
    if math.prod(shape) * itemsize > max_bytes:
        raise Reject("too_large")
    if n == 0 or offset + n > math.prod(shape):
        raise Reject("bad_range")
    try:
        name = frame[48 + 8 * ndim : head].decode("utf-8")
    except UnicodeDecodeError:
        raise Reject("bad_name") from None
    nbytes = n * itemsize
    if kind == BATCH:
        records = _u64(frame, 16)
        stride = 8 + nbytes
        if records == 0 or len(frame) != head + records * stride:
            raise Reject("bad_size")
        body = frame[head:]
        steps = tuple(_u64(body, i * stride) for i in range(records))
        payloads = tuple(body[i * stride + 8 : (i + 1) * stride] for i in range(records))
        return Part(sim, rank, count, code, shape, name, offset, n, steps, payloads)
    step = _u64(frame, 16)
    if inline:
        if part is not None:
            raise Reject("unexpected_frame")
        if len(frame) != head + nbytes:
            raise Reject("bad_size")
        payload = frame[head:]
    else:
        if len(frame) != head:
            raise Reject("bad_size")
        if part is None:
            raise Reject("missing_frame")
        if len(part) != nbytes:
            raise Reject("bad_size")
        payload = part
    return Part(sim, rank, count, code, shape, name, offset, n, (step,), (bytes(payload),))


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _hello(frame: bytes, sim: int) -> Hello:
    if len(frame) < HELLO_FIXED_BYTES:
        raise Reject("truncated")
    rank, count, body_len = _u16(frame, 16), _u16(frame, 18), int.from_bytes(frame[20:24], "little")
    _check_rank(rank, count)
    if body_len > HELLO_BODY_MAX or len(frame) != HELLO_FIXED_BYTES + body_len:
        raise Reject("bad_size")
    try:
        text = frame[HELLO_FIXED_BYTES:].decode("utf-8")
        if text.startswith("\ufeff"):
            raise ValueError("a byte-order mark")
        body = json.loads(text, parse_constant=_no_constants)
        return Hello(sim, rank, count, *_hello_body(body))
    except (ValueError, TypeError, KeyError, UnicodeError):
        raise Reject("bad_hello") from None


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _hello_body(
    body: Any,
) -> tuple[tuple[Field, ...], tuple[tuple[str, float], ...], str | None]:
    """Section 6's rules; any break raises ValueError/TypeError/KeyError (bad_hello)."""
    if not isinstance(body, dict):
        raise TypeError("not an object")
    entries = body["fields"]
    if not isinstance(entries, list) or not entries:
        raise ValueError("fields")
    fields = []
    for e in entries:
        if not isinstance(e, dict):
            raise TypeError("field entry")
        name, dtype, shape = e["name"], e["dtype"], e["shape"]
        if not isinstance(name, str) or not 1 <= len(name.encode("utf-8")) <= 255:
            raise ValueError("name")
        if not isinstance(dtype, str) or dtype not in CODE_OF:
            raise ValueError("dtype")
        if not isinstance(shape, list) or len(shape) > MAX_NDIM:
            raise ValueError("shape")
        if not all(_is_int(d) and 1 <= d < 1 << 64 for d in shape):
            raise ValueError("shape")
        fields.append(Field(name, dtype, tuple(shape)))
    if len({f.name for f in fields}) != len(fields):
        raise ValueError("duplicate names")
    params = body.get("parameters", {})
    if not isinstance(params, dict):
        raise TypeError("parameters")
    values = []
    for k, v in params.items():
        if not (_is_int(v) or isinstance(v, float)) or not math.isfinite(float(v)):
            raise ValueError("parameter")
        values.append((k, float(v)))
    run_id = body.get("run_id")
    if run_id is not None and not (isinstance(run_id, str) and RUN_ID.fullmatch(run_id)):
        raise ValueError("run_id")
    routing = body.get("routing")
    if routing not in (None, "simulation_step"):  # (section 6: any other is refused)
        raise ValueError("routing")
    return tuple(fields), tuple(values), routing
