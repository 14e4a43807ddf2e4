"""The receiver's de-duplication frontier, through a stream: a real `Receiver` fed over
its socket by frames of the reference encoder (`reference_protocol`, written from the
document, not the library's encoder).

The frontier (`StepLedger.frontier`: no local step at or above it is completed) lets a
batch of the next steps skip the per-step dedup. Off by one, a batch that starts at
the last step completed (a restart's re-send overlapping what arrived) takes that fast
path and puts the step twice. The oracle is the stream itself: every (simulation,
step) in the buffer exactly once, bit for bit, and the duplicates counted.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer

SID = 11
U = R.Field("u", "<f4", (4,))


def row(t: int) -> np.ndarray:
    return (np.arange(4) + 10.0 * t).astype(np.float32)


def batch(steps: list[int]) -> bytes:
    head = R.part_header(R.BATCH, SID, len(steps), 0, 1, U, 0, U.size, False)
    return head + b"".join(t.to_bytes(8, "little") + row(t).tobytes() for t in steps)


def data(t: int) -> bytes:
    return R.part_header(R.DATA, SID, t, 0, 1, U, 0, U.size, True) + row(t).tobytes()


@pytest.mark.timeout(60)
def test_a_batch_starting_at_the_last_step_received_puts_that_step_once() -> None:
    # each overlap starts at the frontier minus one, after each way of moving it: a
    # batch of the next steps (mark_range), a DATA (mark), a batch out of order (mark_many)
    messages = [
        R.encode_hello(SID, 0, 1, R.hello_body([U], {})),
        batch([0, 1, 2, 3]),
        batch([3, 4, 5]),  # 3 again
        data(7),
        batch([7, 8]),  # 7 again
        batch([10, 9]),
        batch([10, 11]),  # 10 again
        batch([6]),
        R.encode_bye(SID, 0, 1, 12),
    ]
    buffer = FIFOBuffer(100)
    with running(buffer, expected_simulations=1) as rec:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        try:
            sock.connect(rec.endpoint)
            for frame in messages:
                sock.send(frame)
            samples = drain(buffer)  # the BYE ends the stream: the buffer closes
        finally:
            sock.close(linger=0)
            ctx.term()
        telemetry = rec.telemetry()
    steps = sorted(int(s["time_step"]) for s in samples)
    assert steps == list(range(12)), steps  # each once
    for s in samples:
        assert s["u"].tobytes() == row(int(s["time_step"])).tobytes()
    assert telemetry["duplicates"] == 3 and telemetry["samples_put"] == 12
    assert telemetry["rejected"] == 0
