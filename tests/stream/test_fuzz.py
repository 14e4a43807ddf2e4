"""Fuzzing the receiver against an independent reading of docs/protocol.md.

Fuzz PUSH sockets stream simulations of their own (valid DATA and BATCH, duplicates,
BYE, ABANDON), mutations of those messages (flipped, truncated, extended, reframed;
some mutations keep a message valid) and malformed ones (garbage, bad HELLO bodies,
undeclared fields, wrong client counts, time steps out of bounds, overlapping parts),
while a `Client` subprocess streams a known simulation. What each message must do is
decided by `reference_protocol`, written from docs/protocol.md without the library's
decoder (`fuzz_messages` makes and judges them): the receiver, over real ZeroMQ
sockets, must reject exactly the messages the reference rejects, per reason, accept
the others, and put into the buffer exactly the samples the reference assembles, bit
for bit; the valid client's simulation must be complete and exact, and the thread
alive. A message the document says nothing about is not sent (counted, printed).

``MELISSA_FUZZ_FRAMES=1000000 pytest tests/stream/test_fuzz.py`` runs a longer fuzz.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from fuzz_messages import Generator
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.assembly import REJECT_REASONS
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

FRAMES = int(os.environ.get("MELISSA_FUZZ_FRAMES", "40000"))
SEED = int(os.environ.get("MELISSA_FUZZ_SEED", "20240611"))
FUZZ_SOCKETS = 2
MAX_MESSAGE_BYTES = 1 << 20  # oversized claims are cheap to make against a small bound
MAX_TIME_STEP = 1 << 20
TIME_LIMIT = max(300, FRAMES * 6 // 1000)  # seconds; ~2,000 judged messages/s on 2 cores

#: the receiver's policy for NaN and Inf: "refuse" (the default), so that the reference
#: decides which samples are refused, FINITE flags and all
NONFINITE = os.environ.get("MELISSA_FUZZ_NONFINITE", "refuse")

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


# -- the reference against the specification's worked examples ---------------------------


def spec_dump(label: str) -> bytes:
    """The bytes of the hex dump that follows `<!-- hexdump:LABEL -->` in the spec."""
    spec = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    block = spec.split(f"<!-- hexdump:{label} -->", 1)[1].split("```", 2)[1]
    out = bytearray()
    for line in block.splitlines()[1:]:
        out += bytes.fromhex(line.split("|")[0].split(maxsplit=1)[1])
    return bytes(out)


def test_reference_reads_the_worked_examples() -> None:
    """The reference decodes section 14's dumps into the values the text gives."""
    data = R.decode(spec_dump("data"), None, 1 << 30)
    assert isinstance(data, R.Part)
    assert (data.sim, data.steps, data.rank, data.count) == (7, (3,), 1, 2)
    assert (data.name, data.shape, data.offset, data.n) == ("u", (2, 2), 2, 2)
    assert data.finite  # flags 0x0003: INLINE and FINITE
    assert np.frombuffer(data.payloads[0], "<f4").tolist() == [-0.5, 0.25]
    hello = R.decode(spec_dump("hello"), None, 1 << 30)
    assert hello == R.Hello(7, 1, 2, (R.Field("u", "<f4", (2, 2)),), (("t0", 300.0),))
    assert R.decode(spec_dump("bye"), None, 1 << 30) == R.Bye(7, 1, 2, 10)
    head = spec_dump("data")[:65]  # the two-frame form of the same DATA
    two = bytes(head[:6]) + b"\x02" + head[7:]  # FINITE still, INLINE cleared
    assert R.decode(two, spec_dump("data")[65:], 1 << 30) == data
    with pytest.raises(R.Reject, match="missing_frame"):
        R.decode(two, None, 1 << 30)


# -- the fuzz -------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT)
def test_fuzz_receiver_agrees_with_the_reference() -> None:
    total_valid_msgs = 1 + VALID_STEPS * len(VALID_FIELDS) + 1
    per_socket = [FRAMES // FUZZ_SOCKETS + (i < FRAMES % FUZZ_SOCKETS) for i in range(FUZZ_SOCKETS)]
    gens = [
        Generator(SEED, i, FUZZ_SOCKETS, MAX_MESSAGE_BYTES, MAX_TIME_STEP, NONFINITE)
        for i in range(FUZZ_SOCKETS)
    ]
    buffer = FIFOBuffer(10**7)  # never full: the receiver must not block on it
    config = ReceiverConfig(
        max_message_bytes=MAX_MESSAGE_BYTES,
        max_time_step=MAX_TIME_STEP,
        rcvhwm=10000,
        fields=None,  # each simulation declares its own
        # random payload bytes are NaN at times: the reference knows which samples the
        # policy refuses, and the FINITE flag (set by the generator on some finite parts)
        nonfinite=NONFINITE,
        max_pending=1 << 20,
    )
    rec = Receiver(buffer, config=config)
    rec.start()
    assert rec.endpoint is not None
    ctx = zmq.Context()
    proc: subprocess.Popen[bytes] | None = None
    sockets: list[zmq.Socket] = []
    errors: list[BaseException] = []
    started = time.perf_counter()
    try:
        for _ in range(FUZZ_SOCKETS):
            push = ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 0)
            push.setsockopt(zmq.SNDTIMEO, 60_000)
            push.connect(rec.endpoint)
            sockets.append(push)

        def fuzz(i: int) -> None:
            try:
                for frames in gens[i].messages(per_socket[i]):
                    sockets[i].send_multipart(frames)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=fuzz, args=(i,)) for i in range(FUZZ_SOCKETS)]
        # the valid client paces its steps (a simulation computing), so that its
        # messages interleave with the fuzz sockets' rather than arriving first
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLIENT_CODE,
                rec.endpoint,
                str(VALID_SIM),
                str(VALID_STEPS),
                "0.002",
            ]
        )
        for th in threads:
            th.start()
        for th in threads:
            th.join(TIME_LIMIT - 60)
        assert not errors, errors
        assert not any(th.is_alive() for th in threads)
        assert proc.wait(120) == 0
        refs = [g.ref for g in gens]
        want_messages = total_valid_msgs + sum(r.messages for r in refs)
        # every message was read once the count is reached; `stop` then waits for the
        # thread to finish the last one, so the counters below are final
        wait_until(lambda: rec.telemetry()["messages"] >= want_messages, rec.telemetry)
        rec.stop()
        assert rec._thread is not None and not rec._thread.is_alive()
        elapsed = time.perf_counter() - started
        tel = rec.telemetry()
        assert tel["messages"] == want_messages

        rejected = sum((r.rejected for r in refs), Counter())
        assert set(rejected) <= set(REJECT_REASONS), rejected
        got = {r: int(tel[f"rejected_{r}"]) for r in REJECT_REASONS}
        assert got == {r: rejected.get(r, 0) for r in REJECT_REASONS}
        assert tel["duplicates"] == sum(r.duplicates for r in refs)
        fuzz_samples = [s for r in refs for s in r.samples]
        assert tel["samples_put"] == VALID_STEPS + len(fuzz_samples)
        assert tel["nonfinite_refused"] == sum(r.refused for r in refs)

        # the samples themselves: the reference's, bit for bit, and the valid client's
        held = buffer.get_batch(VALID_STEPS + len(fuzz_samples), timeout=5)
        by_key = {(int(s["simulation_id"]), int(s["time_step"])): s for s in held}
        assert len(by_key) == len(held)
        for want in fuzz_samples:
            key = (int(want["simulation_id"]), int(want["time_step"]))
            assert_same_sample(by_key.pop(key), want, key)
        assert sorted(t for sim, t in by_key) == list(range(VALID_STEPS))
        for (sim, t), sample in by_key.items():
            assert sim == VALID_SIM
            for name, arr in expected_value(VALID_SIM, t).items():
                assert sample[name].dtype == arr.dtype and sample[name].shape == arr.shape
                assert sample[name].tobytes() == arr.tobytes()

        # simulations finished (section 11, End); an abandoned one's end is its ABANDON
        abandoned = set().union(*(r.abandoned for r in refs))
        finished = {s for r in refs for s in r.finished} | {VALID_SIM}
        assert set(rec.finished_simulations()) - abandoned == finished - abandoned

        outcomes = sum((g.outcomes for g in gens), Counter())
        skipped = sum((g.skipped for g in gens), Counter())
        assert outcomes["accepted"] > len(fuzz_samples) > 0  # acceptance was exercised
        if NONFINITE == "refuse":
            assert sum(r.refused for r in refs) > 0  # refusal was exercised
        print(
            f"\nfuzz: {want_messages - total_valid_msgs} messages in {elapsed:.1f} s, "
            f"{len(fuzz_samples)} samples assembled, {sum(r.duplicates for r in refs)} "
            f"duplicates, {sum(r.refused for r in refs)} refused for NaN or Inf, "
            f"{len(finished) - 1} simulations finished; outcomes "
            f"{dict(sorted(outcomes.items()))}; not sent (unspecified) {dict(skipped)}"
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for sock in sockets:
            sock.close(linger=0)
        ctx.term()
        rec.stop()


def assert_same_sample(
    got: dict[str, np.ndarray], want: dict[str, np.ndarray], key: object
) -> None:
    """The receiver's sample equals the reference's: same entries, dtypes, shapes, bytes."""
    assert set(got) == set(want), key
    for name, arr in want.items():
        assert got[name].dtype == arr.dtype, (key, name, got[name].dtype, arr.dtype)
        assert got[name].shape == arr.shape, (key, name, got[name].shape, arr.shape)
        assert got[name].tobytes() == arr.tobytes(), (key, name)
