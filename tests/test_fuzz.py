"""Fuzzing the receiver: malformed and mutated frames next to a valid client.

Fuzz PUSH sockets send frames that the receiver must reject (truncated, flipped header
bytes, bad dtype / shape / offset / count, oversized claims, bad magic / version /
kind, undeclared fields, DATA before HELLO, wrong rank counts, garbage, wrong payload
lengths, extra or missing second frames, bad HELLO bodies) while a `Client` subprocess
streams a known simulation. Every candidate frame is classified locally first, with
`protocol.decode` and an `Ingest` oracle fed the same messages, and only frames whose
rejection reason is known are sent: the receiver's per-reason counters must then match
exactly, the valid simulation must be complete and bit-exact, and the thread alive.

``MELISSA_FUZZ_FRAMES=1000000 pytest tests/test_fuzz.py`` runs a longer fuzz.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
import zmq

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import protocol as P
from melissa_trainer.stream.assembly import REJECT_REASONS
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

FRAMES = int(os.environ.get("MELISSA_FUZZ_FRAMES", "100000"))
SEED = int(os.environ.get("MELISSA_FUZZ_SEED", "20240611"))
FUZZ_SOCKETS = 2
MAX_MESSAGE_BYTES = 1 << 20  # oversized claims are cheap to make against a small bound
MAX_TIME_STEP = 1 << 20
TIME_LIMIT = max(300, FRAMES * 3 // 1000)  # seconds; ~7,000 frames/s on 2 cores

VALID_SIM = 1
VALID_STEPS = 200
# (name, dtype, shape): a small INLINE field and a two-frame one (> INLINE_MAX_BYTES)
VALID_FIELDS = [("u", "<f4", (4, 4)), ("w", "<f8", (10000,))]

CLIENT_CODE = r"""
import sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning

endpoint, sim, steps, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
fields = {"u": ((4, 4), "<f4"), "w": ((10000,), "<f8")}
# batch_bytes=0: one message per field and step, so the receiver's message count is exact
with Client(fields, parameters={"a": 0.5}, simulation_id=sim, endpoints=[endpoint],
            tuning=ClientTuning(batch_bytes=0)) as c:
    for t in range(steps):
        rng = np.random.default_rng([sim, t])
        c.send(t, u=rng.standard_normal((4, 4)).astype("<f4"),
               w=rng.standard_normal(10000).astype("<f8"))
        if delay:
            time.sleep(delay)
"""


def expected_value(sim: int, t: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([sim, t])
    return {
        "u": rng.standard_normal((4, 4)).astype("<f4"),
        "w": rng.standard_normal(10000).astype("<f8"),
    }


# -- the generator ------------------------------------------------------------------------

DECLARED_FIELD = P.FieldSpec("v", np.dtype("<f4"), (3,))


def declared_sim(socket_index: int) -> int:
    """The simulation a fuzz socket declares with a valid HELLO (its first frame)."""
    return 100 + socket_index


def split(frames: list[bytes]) -> list[tuple[bytes, bytes | None]]:
    """How the receiver reads a multipart message: only a DATA header without INLINE
    takes the next frame as its payload; any other frame is a message of its own."""
    out: list[tuple[bytes, bytes | None]] = []
    i = 0
    while i < len(frames):
        f = frames[i]
        if len(f) > 7 and f[5] == P.DATA and not f[6] & P.FLAG_INLINE and i + 1 < len(frames):
            out.append((f, frames[i + 1]))
            i += 2
        else:
            out.append((f, None))
            i += 1
    return out


class Oracle:
    """The reason the receiver gives each message of one fuzz socket, or None (accepted)."""

    def __init__(self, own_sim: int, foreign: set[int]) -> None:
        self.own_sim, self.foreign = own_sim, foreign
        self._reset()

    def _reset(self) -> None:
        self.ingest = Ingest(
            0,
            1,
            put=lambda s: True,
            end=lambda why: None,
            expected=None,
            max_field_bytes=MAX_MESSAGE_BYTES,
            max_pending=4096,
            max_pending_bytes=2 << 30,
            max_time_step=MAX_TIME_STEP,
            recent_size=16,
        )
        self.ingest.hello(P.Hello(self.own_sim, 0, 1, (DECLARED_FIELD,), {}))

    def reason(self, frame: bytes, part: bytes | None) -> str | None:
        """The rejection reason, or None when the message would not be rejected (or its
        outcome depends on other senders: such a message is not sent)."""
        try:
            msg = P.decode(frame, part, MAX_MESSAGE_BYTES)
        except P.ProtocolError as exc:
            return exc.reason if exc.reason in REJECT_REASONS else "other"
        if msg.simulation_id in self.foreign:
            return None  # the valid client's or another fuzz socket's: timing-dependent
        ing = self.ingest
        before = dict(ing.rejected)
        accepted = (ing.samples_put, ing.duplicates, len(ing.pending))
        if isinstance(msg, P.Data):
            ing.data(msg, part is None)
        elif isinstance(msg, P.Batch):
            ing.batch(msg)
        elif isinstance(msg, P.Hello):
            ing.hello(msg)
        elif isinstance(msg, P.Bye):
            ing.bye(msg)
        else:
            return None  # an ABANDON is accepted
        diff = [r for r, n in ing.rejected.items() if n != before[r]]
        mixed = accepted != (ing.samples_put, ing.duplicates, len(ing.pending))
        if mixed or sum(ing.rejected[r] - before[r] for r in diff) > 1:
            self._reset()
            return None  # a batch with accepted records or several rejected: not sent
        if diff:
            return diff[0]
        self._reset()  # accepted (or a duplicate): forget it, it is not sent
        return None


def _u64(rng: np.random.Generator) -> int:
    choice = rng.integers(6)
    if choice == 0:
        return 0
    if choice == 1:
        return (1 << 64) - 1
    if choice == 2:
        return int(rng.integers(1 << 62)) << 2
    return int(rng.integers(0, 64))


def _data(
    sim: int,
    t: int,
    *,
    name: bytes = b"v",
    code: int = 1,
    shape: tuple[int, ...] = (3,),
    offset: int = 0,
    count: int = 3,
    rank: int = 0,
    ranks: int = 1,
    inline: bool = True,
    payload: bytes | None = None,
) -> list[bytes]:
    head = P.encode_data_header(sim, t, rank, ranks, name, code, shape, offset, count, inline)
    body = bytes(12) if payload is None else payload
    return [head + body] if inline else [head, body]


def candidate(rng: np.random.Generator, own: int) -> list[bytes]:
    """One mutated multipart message (not yet classified)."""
    sim = own if rng.random() < 0.6 else int(rng.integers(200, 1 << 40))
    t = int(rng.integers(0, 1000))
    kind = int(rng.integers(17))
    if kind == 0:  # truncated at a random point (DATA, HELLO or BYE)
        base = [
            _data(sim, t)[0],
            P.encode_hello(sim, 0, 1, [DECLARED_FIELD]),
            P.encode_bye(sim, 0, 1, 10),
        ][int(rng.integers(3))]
        return [base[: int(rng.integers(0, len(base)))]]
    if kind == 1:  # flipped bytes in the header
        frame = bytearray(_data(sim, t, inline=bool(rng.integers(2)))[0])
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, min(len(frame), P.DATA_HEADER_BYTES + 9)))
            frame[i] ^= int(rng.integers(1, 256))
        extra = [] if frame[6] & P.FLAG_INLINE else [bytes(12)]
        return [bytes(frame), *extra]
    if kind == 2:  # wrong dtype code
        code = int(rng.choice([0, *range(13, 256)]))
        return _data(sim, t, code=code)
    if kind == 3:  # wrong shape / offset / count
        shape = tuple(_u64(rng) for _ in range(int(rng.integers(0, 4))))
        off, cnt = _u64(rng), _u64(rng)
        return _data(sim, t, shape=shape, offset=off, count=cnt, payload=bytes(4 * (cnt % 64)))
    if kind == 4:  # oversized claims
        dims = (1 << int(rng.integers(20, 40)), int(rng.integers(1, 1 << 20)))
        return _data(sim, t, shape=dims, count=3, inline=bool(rng.integers(2)))
    if kind == 5:  # bad magic / version / kind
        frame = bytearray(
            [_data(sim, t)[0], P.encode_hello(sim, 0, 1, [DECLARED_FIELD])][int(rng.integers(2))]
        )
        which = int(rng.integers(3))
        if which == 0:
            frame[int(rng.integers(4))] ^= int(rng.integers(1, 256))
        elif which == 1:
            frame[4] = int(rng.choice([0, *range(2, 256)]))
        else:
            frame[5] = int(rng.choice([0, *range(4, 256)]))
        return [bytes(frame)]
    if kind == 6:  # undeclared field name (or a wrong dtype / shape for the declared one)
        name = bytes(rng.integers(97, 123, size=int(rng.integers(1, 20)), dtype=np.uint8))
        if rng.random() < 0.3:
            name = bytes(rng.integers(128, 256, size=3, dtype=np.uint8))  # not UTF-8
        return _data(sim, t, name=name)
    if kind == 7:  # DATA or BYE of a simulation that never said HELLO
        other = int(rng.integers(200, 1 << 40))
        return _data(other, t) if rng.random() < 0.7 else [P.encode_bye(other, 0, 1, 3)]
    if kind == 8:  # wrong rank counts
        ranks = int(rng.integers(0, 4))
        rank = int(rng.integers(0, 5))
        if rng.random() < 0.5:
            return _data(sim, t, rank=rank, ranks=ranks)
        return [P.encode_bye(sim, rank, ranks, 5)]
    if kind == 9:  # pure garbage
        return [rng.bytes(int(rng.integers(0, 200)))]
    if kind == 10:  # garbage after a valid prefix
        prefix = P.PREFIX.pack(P.MAGIC, P.VERSION, int(rng.integers(1, 4)), 0, sim)
        return [prefix + rng.bytes(int(rng.integers(0, 120)))]
    if kind == 11:  # valid header, wrong payload length
        n = int(rng.choice([0, 1, 11, 13, 16, 100]))
        return _data(sim, t, payload=bytes(n), inline=bool(rng.integers(2)))
    if kind == 12:  # extra second frames
        base = [
            _data(sim, t)[0],
            P.encode_hello(sim, 0, 1, [DECLARED_FIELD]),
            P.encode_bye(sim, 0, 1, 10),
        ][int(rng.integers(3))]
        return [base, rng.bytes(int(rng.integers(0, 40)))]
    if kind == 13:  # missing second frame, or a third one
        frames = _data(sim, t, inline=False)
        return frames[:1] if rng.random() < 0.5 else [*frames, bytes(12)]
    if kind == 14:  # bad HELLO bodies
        bodies = [
            b"{",
            b"[]",
            b'{"fields": []}',
            b'{"fields": [{"name": "x", "dtype": "<c8", "shape": [2]}]}',
            b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [0]}]}',
            b'{"fields": [{"name": "time_step", "dtype": "<f4", "shape": [2]}]}',
            b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]}], "parameters": {"p": NaN}}',
            b'{"fields": [{"name": "x", "dtype": "<f8", "shape": [1000000000]}]}',
            b'{"fields": [{"name": "x", "dtype": "<f4", "shape": [2]},'
            b' {"name": "x", "dtype": "<f4", "shape": [2]}]}',
            json.dumps({"fields": [{"name": "v", "dtype": "<f8", "shape": [3]}]}).encode(),
            rng.bytes(int(rng.integers(0, 64))),
        ]
        body = bodies[int(rng.integers(len(bodies)))]
        claimed = len(body) if rng.random() < 0.8 else int(rng.integers(0, 1 << 32))
        return [
            P.PREFIX.pack(P.MAGIC, P.VERSION, P.HELLO, 0, sim)
            + P.HELLO_FIXED.pack(0, 1, claimed)
            + body
        ]
    if kind == 15:  # time step beyond max_time_step
        return _data(sim, MAX_TIME_STEP + int(rng.integers(0, 1 << 40)))
    # kind == 16: BATCH with a wrong record count or length, or one bad record
    records = int(rng.integers(0, 4))
    steps = [int(rng.integers(0, 1000)) for _ in range(records)]
    which = int(rng.integers(4))
    if which == 0 and records:  # a record beyond max_time_step
        steps[int(rng.integers(records))] = MAX_TIME_STEP + int(rng.integers(0, 1 << 40))
    claimed = records if which != 1 else records + int(rng.integers(1, 3))
    head = P.encode_batch_header(sim, claimed, 0, 1, b"v", 1, (3,), 0, 3)
    body = b"".join(t.to_bytes(8, "little") + bytes(12) for t in steps)
    if which == 2:
        body += bytes(int(rng.integers(1, 20)))  # trailing bytes
    if which == 3:
        head = P.encode_batch_header(sim, claimed, 0, 1, b"v", 1, (3,), 0, 2)  # part of v
    return [head + body]


def fuzz_messages(
    seed: int, socket_index: int, n_frames: int, foreign: set[int]
) -> Iterator[tuple[list[bytes], list[str]]]:
    """Multipart messages totalling `n_frames` receiver messages, each with the rejection
    reasons of its receiver messages; the first is the socket's valid HELLO."""
    rng = np.random.default_rng([seed, socket_index])
    own = declared_sim(socket_index)
    oracle = Oracle(own, foreign)
    yield [P.encode_hello(own, 0, 1, [DECLARED_FIELD])], []
    sent = 0
    while sent < n_frames:
        frames = candidate(rng, own)
        parts = split(frames)
        if sent + len(parts) > n_frames:
            continue
        reasons = [oracle.reason(f, p) for f, p in parts]
        if any(r is None for r in reasons):
            continue  # an accepted or timing-dependent message: not sent
        sent += len(parts)
        yield frames, [r for r in reasons if r is not None]


# -- the test -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT)
def test_fuzz_frames_rejected_and_valid_stream_exact() -> None:
    total_valid_msgs = 1 + VALID_STEPS * len(VALID_FIELDS) + 1
    buffer = FIFOBuffer(VALID_STEPS + 10)
    config = ReceiverConfig(
        max_message_bytes=MAX_MESSAGE_BYTES, max_time_step=MAX_TIME_STEP, rcvhwm=10000, fields=None
    )
    rec = Receiver(buffer, config=config)
    rec.start()
    assert rec.endpoint is not None
    ctx = zmq.Context()
    proc: subprocess.Popen[bytes] | None = None
    expected: Counter[str] = Counter()
    sockets: list[zmq.Socket] = []
    started = time.perf_counter()
    try:
        per_socket = [
            FRAMES // FUZZ_SOCKETS + (i < FRAMES % FUZZ_SOCKETS) for i in range(FUZZ_SOCKETS)
        ]
        counters: list[Counter[str]] = [Counter() for _ in range(FUZZ_SOCKETS)]
        errors: list[BaseException] = []
        for _ in range(FUZZ_SOCKETS):
            push = ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 0)
            push.setsockopt(zmq.SNDTIMEO, 60_000)
            push.connect(rec.endpoint)
            sockets.append(push)

        def fuzz(i: int) -> None:
            foreign = {VALID_SIM} | {declared_sim(j) for j in range(FUZZ_SOCKETS) if j != i}
            try:
                for frames, reasons in fuzz_messages(SEED, i, per_socket[i], foreign):
                    sockets[i].send_multipart(frames)
                    counters[i].update(reasons)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=fuzz, args=(i,)) for i in range(FUZZ_SOCKETS)]
        delay = "0.002"
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT_CODE, rec.endpoint, str(VALID_SIM), str(VALID_STEPS)]
            + [delay]
        )
        for th in threads:
            th.start()
        for th in threads:
            th.join(TIME_LIMIT - 60)
        assert not errors, errors
        assert proc.wait(120) == 0
        for c in counters:
            expected.update(c)
        fuzz_msgs = sum(per_socket)
        assert sum(expected.values()) == fuzz_msgs
        want_messages = total_valid_msgs + fuzz_msgs + FUZZ_SOCKETS  # + the fuzz HELLOs
        deadline = time.monotonic() + 60
        while rec.telemetry()["messages"] < want_messages:
            assert time.monotonic() < deadline, (rec.telemetry(), want_messages)
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        tel = rec.telemetry()
        rec.check()
        assert rec._thread is not None and rec._thread.is_alive()
        got = {r: int(tel[f"rejected_{r}"]) for r in REJECT_REASONS}
        assert got == {r: expected.get(r, 0) for r in REJECT_REASONS}
        assert tel["rejected"] == fuzz_msgs
        assert tel["messages"] == want_messages
        assert tel["duplicates"] == 0
        assert tel["samples_put"] == VALID_STEPS
        assert rec.finished_simulations() == [VALID_SIM]
        samples = buffer.get_batch(VALID_STEPS, timeout=5)
        steps = sorted(int(s["time_step"]) for s in samples)
        assert steps == list(range(VALID_STEPS))
        for sample in samples:
            assert int(sample["simulation_id"]) == VALID_SIM
            want = expected_value(VALID_SIM, int(sample["time_step"]))
            for name, arr in want.items():
                got_arr = sample[name]
                assert got_arr.dtype == arr.dtype and got_arr.shape == arr.shape
                assert got_arr.tobytes() == arr.tobytes()
        with pytest.raises(TimeoutError):
            buffer.get_batch(1, timeout=0.05)
        print(
            f"\nfuzz: {fuzz_msgs} frames rejected in {elapsed:.1f} s "
            f"({fuzz_msgs / elapsed:,.0f}/s); reasons {dict(sorted(expected.items()))}"
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for sock in sockets:
            sock.close(linger=0)
        ctx.term()
        rec.stop()
