"""A receiver's `samples_put` stays exact across a checkpoint taken while its thread is
blocked in a put (the buffer full: the usual state of a stream mid-run).

The sample of that put is recorded (its step marked, its key in the recent list)
before the put returns; the checkpoint's buffer does not hold it, so the resume
forgets it and takes it again when the simulation re-sends it. The counter of the
checkpoint must then include it too: it did not, and the resume subtracted a sample
it had never counted (`samples_received` one short in 5 of 6 mid-stream resumes of
the heat example). The oracle is independent of the counter: the simulation sends
`STEPS` distinct steps, every one of which the readers of the two runs get once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import drain, send_all

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning

U = P.FieldSpec("u", np.dtype("<f4"), (3,))
STEPS, CAPACITY, PER_BATCH = 24, 4, 3


def value(t: int) -> np.ndarray:
    return np.full(3, t, np.float32)


def messages(kind: str) -> list[list[bytes]]:
    """The simulation's whole stream: HELLO, its steps (one DATA each, or BATCHes of
    `PER_BATCH`), BYE."""
    out = [[P.encode_hello(1, 0, 1, [U])]]
    if kind == "data":
        for t in range(STEPS):
            head = P.encode_data_header(
                1, t, 0, 1, b"u", P.dtype_code(U.dtype), U.shape, 0, 3, True
            )
            out.append([head + value(t).tobytes()])
    else:
        for first in range(0, STEPS, PER_BATCH):
            steps = range(first, first + PER_BATCH)
            head = P.encode_batch_header(1, PER_BATCH, 0, 1, b"u", P.dtype_code(U.dtype),
                                         U.shape, 0, 3)  # fmt: skip
            body = b"".join(t.to_bytes(8, "little") + value(t).tobytes() for t in steps)
            out.append([head + body])
    out.append([P.encode_bye(1, 0, 1, STEPS)])
    return out


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def take(buffer: FIFOBuffer, n: int) -> list[int]:
    """The time steps of `n` samples read from `buffer`, one at a time."""
    steps: list[int] = []
    while len(steps) < n:
        steps += [int(s["time_step"]) for s in buffer.get_batch(1, timeout=20.0)]
    return steps


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["data", "batch"])
@pytest.mark.parametrize("taken", [0, 3, 7, 11, 16, 19])
def test_samples_put_is_exact_after_a_resume_from_a_put_blocked_at_the_snapshot(
    tmp_path: Path, kind: str, taken: int
) -> None:
    tuning = ReceiverTuning(put_timeout=0.02)
    stream = messages(kind)
    per_message = 1 if kind == "data" else PER_BATCH
    buffer = FIFOBuffer(CAPACITY)
    first = Receiver(buffer, config=ReceiverConfig(expected_simulations=1), tuning=tuning)
    first.start()
    ctx = send_all(first.endpoint, stream)
    try:
        before = take(buffer, taken)
        # Blocked in a put: the buffer is full and the thread has ingested a message
        # whose samples do not all fit (it cannot ingest another until they do).
        wait_until(
            lambda: (
                len(buffer) == CAPACITY
                and (first.telemetry()["messages"] - 1) * per_message > taken + CAPACITY
            ),
            "the receiver to block on the full buffer",
        )
        buffer.save(tmp_path / "buffer")  # a trainer's checkpoint: the buffer, then the record
        state = first.state_dict()
    finally:
        first.stop()
        ctx.term()

    restored = FIFOBuffer(CAPACITY)
    restored.load(tmp_path / "buffer")
    second = Receiver(restored, config=ReceiverConfig(expected_simulations=1), tuning=tuning)
    second.load_state_dict(state)
    second.start()
    try:
        ctx = send_all(second.endpoint, stream)  # the simulation runs again: everything
        after = [int(s["time_step"]) for s in drain(restored)]
        ctx.term()
        counters = second.telemetry()
    finally:
        second.stop()
    assert sorted(before + after) == list(range(STEPS))  # each step once: the oracle
    assert counters["samples_put"] == STEPS
    assert counters["simulations_finished"] == 1
