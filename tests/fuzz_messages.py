"""The fuzz test's message generator: valid streams, mutations of them, and malformed
messages, each judged by `reference_protocol` (docs/protocol.md) before it is sent.

One `Generator` per fuzz socket. It declares simulations of its own (ids in its own
residue class, so that no other sender touches them and the order in which the
receiver reads the senders does not matter), streams their parts as DATA and BATCH,
re-sends some (duplicates), ends some with BYE, abandons some, and mixes in mutated
and malformed messages. The reference receiver decides what each one does; a message
the document says nothing about (`Unspecified`) is not sent, and counted in `skipped`.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import reference_protocol as R
from reference_receiver import ReferenceReceiver

OWN_BASE = 1000  # fuzz simulation ids: OWN_BASE + k * sockets + socket index
STEPS = 12  # time steps per fuzz simulation
NAMES = ["u", "v", "rho", "température", "w2"]


@dataclass
class Plan:
    """A fuzz simulation as its (well-behaved) ranks would stream it."""

    sid: int
    fields: list[R.Field]
    count: int
    parameters: dict[str, float]
    todo: deque[tuple[int, int, int]] = field(default_factory=deque)  # (step, field, rank)

    def parts(self, f: R.Field) -> list[tuple[int, int, int]]:
        """(rank, offset, n) of each rank's non-empty contiguous part, in rank order."""
        out, size = [], f.size
        for rank in range(self.count):
            lo, hi = rank * size // self.count, (rank + 1) * size // self.count
            if hi > lo:
                out.append((rank, lo, hi - lo))
        return out


class Generator:
    """Messages for fuzz socket `index` of `sockets`, judged by `ref` as they are made."""

    def __init__(
        self,
        seed: int,
        index: int,
        sockets: int,
        max_bytes: int,
        max_step: int,
        nonfinite: str = "accept",
    ):
        self.rng = np.random.default_rng([seed, index])
        self.index, self.sockets, self.max_bytes, self.max_step = (
            index,
            sockets,
            max_bytes,
            max_step,
        )
        self.ref = ReferenceReceiver(0, 1, max_bytes, max_step, self.mine, nonfinite)
        self.plans: list[Plan] = []
        self.next_k = 0
        self.queue: deque[list[bytes]] = deque()  # the other ranks' HELLOs of a new plan
        self.skipped: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.last: list[str | None] = []  # the outcomes of the last message yielded

    def mine(self, sid: int) -> bool:
        return sid >= OWN_BASE and (sid - OWN_BASE) % self.sockets == self.index

    def own_id(self, k: int) -> int:
        return OWN_BASE + k * self.sockets + self.index

    def messages(self, n: int) -> Iterator[list[bytes]]:
        """ZeroMQ messages (lists of frames) until `n` protocol messages were judged."""
        while self.ref.messages < n:
            frames = self.queue.popleft() if self.queue else self.candidate()
            try:
                reasons = self.ref.classify(frames)
            except R.Unspecified as exc:
                self.skipped[str(exc)] += 1
                continue
            self.outcomes.update(r or "accepted" for r in reasons)
            self.last = reasons
            yield frames

    # -- valid messages -------------------------------------------------------------------

    def new_plan(self) -> Plan:
        rng = self.rng
        names = rng.choice(NAMES, size=int(rng.integers(1, 3)), replace=False)
        fields = []
        for name in names:
            code = int(rng.integers(1, 13))
            shape = tuple(int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, 4))))
            fields.append(R.Field(str(name), R.DTYPES[code][0], shape))
        params = {f"p{j}": float(rng.standard_normal()) for j in range(int(rng.integers(0, 3)))}
        plan = Plan(self.own_id(self.next_k), fields, int(rng.integers(1, 4)), params)
        self.next_k += 1
        steps = [int(t) for t in rng.permutation(STEPS)]
        for t in steps:
            items = [(t, i, r) for i, f in enumerate(fields) for r, _, _ in plan.parts(f)]
            plan.todo.extend(items[j] for j in rng.permutation(len(items)))
        self.plans = [*self.plans[-5:], plan]  # a few live plans at a time
        return plan

    def hello(self, plan: Plan, rank: int, extra: dict | None = None) -> list[bytes]:
        body = json.loads(R.hello_body(plan.fields, plan.parameters))
        body.update(extra or {})
        return [R.encode_hello(plan.sid, rank, plan.count, json.dumps(body).encode())]

    def payload(self, f: R.Field, n: int) -> bytes:
        return self.rng.bytes(n * R.DTYPES[R.CODE_OF[f.dtype]][1])

    def data(
        self, plan: Plan, t: int, i: int, rank: int, inline: bool | None = None
    ) -> list[bytes]:
        f = plan.fields[i]
        parts = plan.parts(f)  # a rank without a part of `f` sends the first rank's
        rank, off, n = next((p for p in parts if p[0] == rank), parts[0])
        inline = bool(self.rng.integers(2)) if inline is None else inline
        body = self.payload(f, n)
        finite = self.flag_finite(f, [body])
        head = R.part_header(R.DATA, plan.sid, t, rank, plan.count, f, off, n, inline, finite)
        return [head + body] if inline else [head, body]

    def flag_finite(self, f: R.Field, payloads: list[bytes]) -> bool:
        """FINITE, as a sender that checks sets it: on float payloads without NaN or
        Inf, half of the time (the other half: a sender that does not check)."""
        code = R.CODE_OF[f.dtype]
        return (
            f.dtype in R.FLOAT_DTYPES
            and not any(R.holds_nonfinite(code, p) for p in payloads)
            and bool(self.rng.integers(2))
        )

    def batch(self, plan: Plan, steps: list[int], i: int, rank: int) -> bytes:
        f = plan.fields[i]
        _, off, n = next(p for p in plan.parts(f) if p[0] == rank)
        payloads = [self.payload(f, n) for _ in steps]
        finite = self.flag_finite(f, payloads)
        head = R.part_header(
            R.BATCH, plan.sid, len(steps), rank, plan.count, f, off, n, False, finite
        )
        return head + b"".join(
            t.to_bytes(8, "little") + p for t, p in zip(steps, payloads, strict=True)
        )

    def next_parts(self, plan: Plan) -> list[bytes]:
        """The next part(s) the plan's ranks would send: a DATA, or a BATCH per field
        of one rank for the next few steps (one ZeroMQ message, as the client does)."""
        t, i, rank = plan.todo.popleft()
        if self.rng.random() < 0.7:
            return self.data(plan, t, i, rank)
        # the same rank's later parts of this field join the batch
        steps = [t]
        for item in list(plan.todo)[:30]:
            if item[1:] == (i, rank) and len(steps) < 4:
                steps.append(item[0])
                plan.todo.remove(item)
        return [self.batch(plan, steps, i, rank)]

    def bye(self, plan: Plan, rank: int) -> list[bytes]:
        sim = self.ref.sims.get(plan.sid)
        done = len(sim.completed) if sim is not None else 0
        sent = done if self.rng.random() < 0.8 else done + int(self.rng.integers(1, 4))
        return [R.encode_bye(plan.sid, rank, plan.count, sent)]

    def valid(self) -> list[bytes]:
        """A message a well-behaved client (or launcher) of an own simulation sends."""
        rng = self.rng
        live = [p for p in self.plans if p.todo]
        if not live or rng.random() < 0.03:
            plan = self.new_plan()
            self.queue.extend(self.hello(plan, r) for r in range(1, plan.count))
            return self.hello(plan, 0)
        plan = live[int(rng.integers(len(live)))]
        x = rng.random()
        if x < 0.8:
            return self.next_parts(plan)
        if x < 0.9:  # a restarted client re-sends a step already put: a duplicate
            sim = self.ref.sims.get(plan.sid)
            if sim is not None and sim.completed:
                t = sorted(sim.completed)[int(rng.integers(len(sim.completed)))]
                i = int(rng.integers(len(plan.fields)))
                rank = plan.parts(plan.fields[i])[0][0]
                return self.data(plan, t, i, rank)
            return self.next_parts(plan)
        if x < 0.95:
            plan = self.plans[int(rng.integers(len(self.plans)))]
            return self.bye(plan, int(rng.integers(plan.count)))
        if x < 0.97:
            return [R.encode_abandon(plan.sid, bool(rng.integers(2)))]
        # a HELLO again: identical (a restart), with unknown keys or a run id (ignored),
        # or naming another routing than the first (hello_mismatch) or an unknown one
        extras: list[dict] = [{}, {"future_key": [1, 2]}, {"run_id": "run-7_b"}]
        extras += [{"routing": "simulation_step"}, {"routing": "sideways"}]
        extra = extras[int(rng.integers(len(extras)))]
        return self.hello(plan, int(rng.integers(plan.count)), extra)

    # -- what the receiver must reject (or, for some mutations, still accept) --------------

    def candidate(self) -> list[bytes]:
        x = self.rng.random()
        if x < 0.45 or not self.plans:
            return self.valid()
        if x < 0.75:
            return self.mutated(self.valid())
        return self.malformed()

    def mutated(self, frames: list[bytes]) -> list[bytes]:
        """A valid message, changed: many changes break it, some keep it valid (payload
        bytes, the reserved byte, flag bits 1-15, INLINE with the payload moved). Bit 1,
        FINITE, set on a payload holding NaN or Inf is `Unspecified` (not sent)."""
        rng = self.rng
        head = bytearray(frames[0])
        how = int(rng.integers(9))
        if how == 0:  # flipped bytes, mostly in the header
            for _ in range(int(rng.integers(1, 4))):
                span = min(len(head), 64) if rng.random() < 0.8 else len(head)
                head[int(rng.integers(span))] ^= int(rng.integers(1, 256))
        elif how == 1:  # truncated
            head = head[: int(rng.integers(len(head)))]
        elif how == 2:  # bytes appended
            head += rng.bytes(int(rng.integers(1, 9)))
        elif how == 3 and len(head) >= 32:  # the reserved byte, flag bits 1-15 (FINITE: 1)
            head[31] = int(rng.integers(256)) if head[5] in (R.DATA, R.BATCH) else head[31]
            head[6] = (head[6] & 1) | (int(rng.integers(128)) << 1)
            head[7] = int(rng.integers(256))
        elif how == 4 and len(frames) == 2:  # two frames joined: INLINE set (valid) or not
            if rng.random() < 0.7:
                head[6] |= R.INLINE
            return [bytes(head) + frames[1]]
        elif how == 5:  # a frame missing, or one more
            return frames[:1] if len(frames) == 2 else [*frames, rng.bytes(int(rng.integers(40)))]
        elif how == 6 and len(head) > 48:  # the payload changed: still valid
            at = len(head) - 1 - int(rng.integers(min(8, len(head) - 48)))
            head[at] ^= 0xFF
        elif how == 7 and len(head) >= 48 and head[5] in (R.DATA, R.BATCH):  # header numbers
            at = int(rng.choice([16, 24, 26, 28, 29, 30, 32, 40]))
            width = {16: 8, 24: 2, 26: 2, 28: 1, 29: 1, 30: 1, 32: 8, 40: 8}[at]
            value = int(rng.choice([0, 1, 2, 3, 9, 13, 255, (1 << 8 * width) - 1]))
            head[at : at + width] = (value % (1 << 8 * width)).to_bytes(width, "little")
        elif how == 8 and len(frames) == 2:  # the payload frame resized
            return [
                bytes(head),
                frames[1][: -int(rng.integers(1, 3))] + bytes(4 * int(rng.integers(2))),
            ]
        return [bytes(head), *frames[1:]]

    def malformed(self) -> list[bytes]:
        """Messages wrong from the start, or wrong only against their simulation."""
        rng = self.rng
        plan = self.plans[int(rng.integers(len(self.plans)))]
        f = plan.fields[0]
        how = int(rng.integers(12))
        if how == 0:
            return [rng.bytes(int(rng.integers(0, 120)))]
        if how == 1:  # a valid prefix, then garbage
            return [R.prefix(int(rng.integers(1, 6)), plan.sid) + rng.bytes(int(rng.integers(60)))]
        if how == 2:  # a simulation that never said HELLO
            other = self.own_id(10**6 + int(rng.integers(1 << 20)))
            ghost = Plan(other, plan.fields, plan.count, plan.parameters)
            if rng.random() < 0.7:
                return self.data(ghost, int(rng.integers(STEPS)), 0, 0)
            return [R.encode_bye(other, 0, plan.count, 3)]
        if how == 3:  # another client count
            ghost = Plan(plan.sid, plan.fields, plan.count + 1, plan.parameters)
            return self.data(ghost, int(rng.integers(STEPS)), 0, 0)
        if how == 4:  # an undeclared field, or another dtype or shape
            name = ["nope", "u", "rho"][int(rng.integers(3))]
            code = int(rng.integers(1, 13))
            shape = tuple(int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, 3))))
            ghost = Plan(plan.sid, [R.Field(name, R.DTYPES[code][0], shape)], plan.count, {})
            return self.data(ghost, int(rng.integers(STEPS)), 0, 0)
        if how == 5:  # a time step at or beyond max_time_step
            return self.data(plan, self.max_step + int(rng.integers(0, 1 << 40)), 0, 0)
        if how == 6:  # another rank's part overlapped
            if plan.count < 2 or len(plan.parts(f)) < 2:
                return self.valid()
            t = int(rng.integers(STEPS))
            (r0, o0, n0), (r1, _, _) = plan.parts(f)[:2]
            head = R.part_header(R.DATA, plan.sid, t, r1, plan.count, f, o0, 1, True)
            return [head + self.payload(f, 1)]
        if how == 7:  # a HELLO disagreeing with the first one
            other = dict(plan.parameters, extra=1.5)
            ghost = Plan(plan.sid, plan.fields, plan.count, other)
            return self.hello(ghost, 0)
        if how == 8:  # a HELLO declaring a reserved name or a field beyond the bound
            big = R.Field("big", "<f8", (self.max_bytes // 8 + 1,))
            name = ["time_step", "parameters", "simulation_id"][int(rng.integers(3))]
            bad = [big, R.Field(name, "<f4", (2,))][int(rng.integers(2))]
            ghost = Plan(self.own_id(self.next_k + 10**6), [bad], 1, {})
            return self.hello(ghost, 0)
        if how == 9:  # bad HELLO bodies
            bodies = [
                b"{",
                b"[]",
                b'{"fields": []}',
                b'{"fields": [{"name": "x", "dtype": "<c8", "shape": [2]}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [0]}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2.0]}]}',
                b'{"fields": [{"name": "", "dtype": "<f4", "shape": [2]}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4"}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]}],'
                b' "parameters": {"p": NaN}}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2.5]}]}',
                b'{"fields": [{"name": "x", "dtype": "float32", "shape": [2]}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]}],'
                b' "parameters": {"p": "1.5"}}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]}], "parameters": [1]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [1,1,1,1,1,1,1,1,1]}]}',
                b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]},'
                b' {"name": "x", "dtype": "<f4", "shape": [2]}]}',
                rng.bytes(int(rng.integers(0, 64))),
            ]
            body = bodies[int(rng.integers(len(bodies)))]
            frame = R.encode_hello(self.own_id(self.next_k + 10**6), 0, 1, body)
            if rng.random() < 0.2:  # a body length that disagrees
                frame = frame[:20] + int(rng.integers(1 << 32)).to_bytes(4, "little") + frame[24:]
            return [frame]
        if how == 10:  # bad dtype code, ndim, oversized shape
            head = bytearray(R.part_header(R.DATA, plan.sid, 0, 0, plan.count, f, 0, 1, True))
            which = int(rng.integers(3))
            if which == 0:
                head[28] = int(rng.choice([0, *range(13, 256)]))
            elif which == 1:
                head[29] = int(rng.integers(9, 256))
            else:
                big = R.Field(f.name, f.dtype, (1 << int(rng.integers(20, 40)), 1 << 20))
                head = bytearray(R.part_header(R.DATA, plan.sid, 0, 0, plan.count, big, 0, 1, True))
            return [bytes(head) + bytes(8)]
        # how == 11: a BATCH with a record count that disagrees with its length
        frame = bytearray(self.batch(plan, [0, 1], 0, plan.parts(f)[0][0]))
        frame[16:24] = int(rng.choice([0, 1, 3, 1 << 40])).to_bytes(8, "little")
        return [bytes(frame)]
