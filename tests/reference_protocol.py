"""A second reading of docs/protocol.md, written from the document alone, for the fuzz test.

`tests/test_fuzz.py` sends mutated and valid messages to a real `Receiver` and asks this
module what the document says must happen to each: accepted (and which samples reach
the buffer, with which bytes) or rejected (and for which reason). It was written
without reading `melissa_trainer/stream/protocol.py` or the receiver's code, so that a
message the library accepts wrongly (or decodes into other values) can be caught.

Where the document is silent about a message (for example a client rank sending the
same part of a step twice), `classify` raises `Unspecified` and the test does not send
it: the fuzz checks only what the document promises. Section numbers below are those
of docs/protocol.md.
"""

from __future__ import annotations

import copy
import json
import math
import re
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# section 5: the common prefix
MAGIC = b"MTRN"
VERSION = 2
HELLO, DATA, BYE, ABANDON, BATCH = 1, 2, 3, 4, 5
INLINE = 0x0001  # DATA flags bit 0
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


Message = Hello | Part | Bye | Abandon


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
) -> bytes:
    """A DATA header (`first` = the time step) or a BATCH header (`first` = R)."""
    name = f.name.encode()
    return (
        prefix(kind, sim, INLINE if inline else 0)
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
        return _part(frame, part, kind, bool(flags & INLINE), sim, max_bytes)
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
    raise Reject("bad_kind")


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


def _hello_body(body: Any) -> tuple[tuple[Field, ...], tuple[tuple[str, float], ...]]:
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
    return tuple(fields), tuple(values)


# -- the receiver (sections 10, second table, and 11) ----------------------------------------


@dataclass
class _Sim:
    hello: Hello
    byes: dict[int, int] = field(default_factory=dict)  # client rank -> steps sent
    completed: set[int] = field(default_factory=set)  # time steps put
    # time step -> field name -> [(client rank, offset, n, payload)]
    pending: dict[int, dict[str, list[tuple[int, int, int, bytes]]]] = field(default_factory=dict)
    finished: bool = False
    abandoned: set[int] = field(default_factory=set)  # steps pending at an ABANDON


class ReferenceReceiver:
    """What receiver `rank` of `world_size` does with a sequence of messages, by the
    document: its rejections by reason, duplicates, the samples it puts (in order) and
    the simulations it finishes. `classify` changes nothing when it raises."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        max_bytes: int,
        max_time_step: int,
        mine: Callable[[int], bool] = lambda sim: True,
    ) -> None:
        self.mine = mine
        self.rank, self.world_size = rank, world_size
        self.max_bytes, self.max_time_step = max_bytes, max_time_step
        self.sims: dict[int, _Sim] = {}
        self.rejected: Counter[str] = Counter()
        self.duplicates = 0
        self.messages = 0
        self.samples: list[dict[str, np.ndarray]] = []
        self.finished: list[int] = []
        self.abandoned: set[int] = set()

    def classify(self, frames: list[bytes]) -> list[str | None]:
        """Feed one ZeroMQ message; per protocol message (or BATCH record): the reason
        it is rejected, or None (accepted, or a duplicate). Raises `Unspecified` (state
        unchanged) if the document does not say what happens to one of its messages, or
        if one names a simulation that is not `mine` (another sender's: the outcome
        would depend on the order in which the receiver reads the senders)."""
        msgs: list[Message | Reject] = []
        for frame, part in split(frames):
            try:
                msgs.append(decode(frame, part, self.max_bytes))
            except Reject as exc:
                msgs.append(exc)
        decoded = [m for m in msgs if not isinstance(m, Reject)]
        if not all(self.mine(m.sim) for m in decoded):
            raise Unspecified("another sender's simulation")
        keys = [(m.sim, m.name if isinstance(m, Part) else None) for m in decoded]
        if len(set(keys)) == len(keys) and all(isinstance(m, Part) for m in decoded[1:]):
            # the usual case (one message, or the BATCHes of several fields of a rank):
            # no message's outcome depends on an earlier one's, so all are checked
            # before any is applied (a checked message changes nothing)
            plan = [self._plan(m) for m in msgs]
            out: list[str | None] = []
            for m, outcome in zip(msgs, plan, strict=True):
                self.messages += 1
                out.extend(self._apply(m, outcome))
            return out
        return self._classify_in_turn(msgs, {m.sim for m in decoded})

    def _classify_in_turn(
        self, msgs: list[Message | Reject], touched: set[int]
    ) -> list[str | None]:
        """Each message checked against the state the earlier ones left, the state put
        back as it was if one is Unspecified."""
        saved = (
            {s: copy.deepcopy(self.sims.get(s)) for s in touched},
            self.rejected.copy(),
            self.duplicates,
            self.messages,
            len(self.samples),
            len(self.finished),
            set(self.abandoned),
        )
        out: list[str | None] = []
        try:
            for m in msgs:
                outcome = self._plan(m)
                self.messages += 1
                out.extend(self._apply(m, outcome))
        except Unspecified:
            sims, self.rejected, self.duplicates, self.messages, n, f, self.abandoned = saved
            for s, old in sims.items():
                if old is None:
                    self.sims.pop(s, None)
                else:
                    self.sims[s] = old
            del self.samples[n:], self.finished[f:]
            raise
        return out

    def _plan(self, m: Message | Reject) -> Any:
        """The outcome of `m`, without changing state (raises Unspecified)."""
        if isinstance(m, Reject):
            return m.reason
        if isinstance(m, Hello):
            return self._hello_reason(m)
        if isinstance(m, Bye):
            return self._bye_reason(m)
        if isinstance(m, Abandon):
            return None
        return self._part_reasons(m)

    def _hello_reason(self, m: Hello) -> str | None:
        for f in m.fields:  # the first field that breaks a rule gives the reason
            if f.name in RESERVED:
                return "bad_hello"
            if f.nbytes > self.max_bytes:
                return "too_large"
        sim = self.sims.get(m.sim)
        if sim is None:
            return None
        if sim.finished:
            raise Unspecified("a HELLO of a finished simulation (a restart)")
        old = sim.hello
        if (old.fields, old.parameters, old.count) == (m.fields, m.parameters, m.count):
            return None
        same = (old.fields, sorted(old.parameters), old.count)
        if same == (m.fields, sorted(m.parameters), m.count):
            raise Unspecified("the same parameters in another order")
        return "hello_mismatch"

    def _bye_reason(self, m: Bye) -> str | None:
        sim = self.sims.get(m.sim)
        if sim is None:
            return "no_hello"
        if sim.finished and m.count != sim.hello.count:
            raise Unspecified("a BYE of a finished simulation")
        if m.count != sim.hello.count:
            return "bad_client_count"
        if m.rank in sim.byes and sim.byes[m.rank] != m.steps_sent:
            raise Unspecified("a second BYE of a rank, with another count")
        return None

    def _part_reasons(self, m: Part) -> str | list[str | None]:
        """One reason for the whole DATA or BATCH (no HELLO), or one per record."""
        if m.sim not in self.sims:
            return "no_hello"
        if len(set(m.steps)) != len(m.steps):
            raise Unspecified("a BATCH holding one time step twice")
        sim = self.sims[m.sim]
        if len(m.steps) > 1 and not sim.finished and len(sim.byes) >= sim.hello.count:
            # it may finish at one record: the later ones are new steps of a finished
            # simulation (section 11: not specified)
            raise Unspecified("a BATCH of a simulation that may finish within it")
        return [self._record_reason(m, t) for t in m.steps]

    def _record_reason(self, m: Part, t: int) -> str | None:
        """Section 10's receiver rules for one DATA (or BATCH record), in their order."""
        sim = self.sims[m.sim]
        if t >= self.max_time_step:
            return "bad_step"
        if t % self.world_size != self.rank:
            return "wrong_receiver"
        if m.count != sim.hello.count:
            return "bad_client_count"
        spec = next((f for f in sim.hello.fields if f.name == m.name), None)
        if spec is None or CODE_OF[spec.dtype] != m.code or spec.shape != m.shape:
            return "bad_field"
        if t in sim.completed:
            return "duplicate"
        if sim.finished:
            raise Unspecified("a new time step of a finished simulation")
        if t in sim.abandoned:
            raise Unspecified("a step that was pending when its simulation was abandoned")
        parts = sim.pending.get(t, {}).get(m.name, [])
        if any(rank == m.rank for rank, _, _, _ in parts):
            return "duplicate"  # this rank's part of the field came already (a re-send)
        if any(off < m.offset + m.n and m.offset < off + n for _, off, n, _ in parts):
            return "overlap"
        return None

    def _apply(self, m: Message | Reject, outcome: Any) -> list[str | None]:
        if isinstance(outcome, str):  # rejected whole
            self.rejected[outcome] += 1
            return [outcome]
        if isinstance(m, Hello):
            if m.sim not in self.sims:
                self.sims[m.sim] = _Sim(m)
            return [None]
        if isinstance(m, Bye):
            self.sims[m.sim].byes[m.rank] = m.steps_sent
            self._maybe_finish(m.sim)
            return [None]
        if isinstance(m, Abandon):
            self.abandoned.add(m.sim)
            if m.sim in self.sims:
                s = self.sims[m.sim]
                s.abandoned |= set(s.pending)
            return [None]
        assert isinstance(m, Part)
        out: list[str | None] = []
        for t, payload, reason in zip(m.steps, m.payloads, outcome, strict=True):
            if reason == "duplicate":
                self.duplicates += 1
                out.append(None)
            elif reason is not None:
                self.rejected[reason] += 1
                out.append(reason)
            else:
                self._add(m, t, payload)
                out.append(None)
        return out

    def _add(self, m: Part, t: int, payload: bytes) -> None:
        sim = self.sims[m.sim]
        step = sim.pending.setdefault(t, {})
        step.setdefault(m.name, []).append((m.rank, m.offset, m.n, payload))
        fields = sim.hello.fields
        if any(sum(p[2] for p in step.get(f.name, [])) != f.size for f in fields):
            return
        sample: dict[str, np.ndarray] = {}
        for f in fields:
            data = b"".join(p[3] for p in sorted(step[f.name], key=lambda p: p[1]))
            sample[f.name] = np.frombuffer(data, dtype=np.dtype(f.dtype)).reshape(f.shape)
        sample["simulation_id"] = np.array(m.sim, dtype=np.int64)
        sample["time_step"] = np.array(t, dtype=np.int64)
        sample["parameters"] = np.array([v for _, v in sim.hello.parameters], dtype=np.float64)
        del sim.pending[t]
        sim.completed.add(t)
        self.samples.append(sample)
        self._maybe_finish(m.sim)

    def _maybe_finish(self, sid: int) -> None:
        """Section 11, End: every client rank's BYE, and as many steps as the largest
        count they give."""
        sim = self.sims[sid]
        if sim.finished or len(sim.byes) < sim.hello.count:
            return
        if len(sim.completed) >= max(sim.byes.values()):
            sim.finished = True
            self.finished.append(sid)
