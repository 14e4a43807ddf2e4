"""A checkpoint taken while a pump's samples wait behind a full buffer (the feeder's
`overflow`) loses no step across the resume, however large the BATCH they came in.

A pump (`StreamSource.wait_for` in the training thread) never blocks: what of a BATCH
does not fit in the full buffer waits in `Feeder.overflow`, its steps already marked in
the ingest ledger and their keys in its recent list. The trainer saves the buffer first
(without them), then the receiver's record (with them marked); the resume forgets the
last ``marked - buffer_put`` keys of the recent list, so that the simulation's rerun is
taken again. A key the list no longer held stayed marked: the rerun's step was dropped
as a duplicate and never trained on. The list kept ``capacity + 16`` keys, fewer than
one BATCH of small fields (a client coalesces 64 KiB: thousands of records), so a
checkpoint behind one lost most of it; the same held for the receiver's thread blocked
in such a BATCH's put.

The oracle is independent of the receiver's counters: the simulation sends `steps`
distinct steps; what the first run's reader took, plus everything the restored buffer
yields once the simulation has run again whole, is each of them exactly once. A second
case has the receiver's thread take over between the buffer's save and the record
(the trainer pumps no more while it saves): it puts the samples waiting, and ingests
and marks more, after the buffer's snapshot. A third has no pump: the thread is blocked
in a put when the checkpoint comes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import drain, send_all
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning

U = P.FieldSpec("u", np.dtype("<f4"), (3,))
CAPACITY = 4  # the receiver keeps CAPACITY + 16 recent keys
BATCHES = 4
#: the thread never takes over from the pumps (an hour): only the pumps ingest
LONG_WAIT = 3600.0


def value(t: int) -> np.ndarray:
    return np.full(3, t, np.float32)


def stream(per_batch: int) -> list[list[bytes]]:
    """One simulation's whole stream: HELLO, `BATCHES` BATCHes of `per_batch` steps, BYE."""
    steps = BATCHES * per_batch
    out = [[P.encode_hello(1, 0, 1, [U])]]
    for first in range(0, steps, per_batch):
        head = P.encode_batch_header(1, per_batch, 0, 1, b"u", P.dtype_code(U.dtype),
                                     U.shape, 0, 3)  # fmt: skip
        body = b"".join(
            t.to_bytes(8, "little") + value(t).tobytes() for t in range(first, first + per_batch)
        )
        out.append([head + body])
    out.append([P.encode_bye(1, 0, 1, steps)])
    return out


def steps_of(samples: list[dict[str, np.ndarray]]) -> list[int]:
    return [int(s["time_step"]) for s in samples]


def pump_until_waiting(receiver: Receiver, buffer: FIFOBuffer, taken: int) -> list[int]:
    """The training thread: pump, and read `taken` samples one by one, until a pump
    leaves samples waiting behind the full buffer; the steps read."""
    before: list[int] = []
    while True:
        receiver.pump(0.05)
        if receiver.backpressured():  # a pump left samples waiting behind the full buffer
            if len(before) == taken:
                return before
            before += steps_of(buffer.get_batch(1, timeout=20.0))


def read_until_blocked(receiver: Receiver, buffer: FIFOBuffer, taken: int) -> list[int]:
    """A reader that never pumps: read `taken` samples, then wait for the receiver's
    thread to block in a put on the full buffer; the steps read."""
    before: list[int] = []
    while len(before) < taken:
        before += steps_of(buffer.get_batch(1, timeout=20.0))
    wait_until(
        lambda: receiver.backpressured() and len(buffer) == CAPACITY,
        "the thread to block on the full buffer",
        UNTIL_TEST_TIMEOUT,
    )
    return before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["pump", "pump-then-thread-in-the-window", "thread"])
@pytest.mark.parametrize("per_batch", [3, 64], ids=["small-batch", "batch-beyond-recent"])
@pytest.mark.parametrize("taken", [0, 2, 5])
def test_a_checkpoint_behind_a_pumps_overflow_loses_and_repeats_no_step(
    tmp_path: Path, per_batch: int, taken: int, mode: str
) -> None:
    steps = BATCHES * per_batch
    pumps, window = mode != "thread", mode == "pump-then-thread-in-the-window"
    tuning = ReceiverTuning(takeover=LONG_WAIT if pumps else 0.5, put_timeout=0.02)
    messages = stream(per_batch)
    buffer = FIFOBuffer(CAPACITY)
    first = Receiver(buffer, config=ReceiverConfig(expected_simulations=1), tuning=tuning)
    first.start()
    ctx = None
    try:
        if pumps:  # the thread hands the socket over to the first pump that serves
            wait_until(lambda: first.pump(0.05), "a pump that serves", UNTIL_TEST_TIMEOUT)
        ctx = send_all(first.endpoint, messages)
        if pumps:
            before = pump_until_waiting(first, buffer, taken)
        else:
            before = read_until_blocked(first, buffer, taken)
        assert first.backpressured() and len(buffer) == CAPACITY
        if window:
            # room the reader made since; the trainer stops pumping to checkpoint, so
            # the thread takes over (`_last_pump` long past) once the buffer is saved
            before += steps_of(buffer.get_batch(2, timeout=20.0))
        buffer.save(tmp_path / "buffer")  # a trainer's checkpoint: the buffer, then the record
        if window:
            first._last_pump = -math.inf  # as before any pump: the thread takes over
            put_before = buffer.stats().put
            # the thread puts what waits (and ingests more, marking it) after the save
            wait_until(
                lambda: buffer.stats().put > put_before and len(buffer) == CAPACITY,
                "the thread to put after the buffer's save",
                UNTIL_TEST_TIMEOUT,
            )
        state = first.state_dict()
    finally:
        first.stop()
        if ctx is not None:
            ctx.term()

    restored = FIFOBuffer(CAPACITY)
    restored.load(tmp_path / "buffer")
    second = Receiver(restored, config=ReceiverConfig(expected_simulations=1))
    second.load_state_dict(state)
    second.start()
    try:
        ctx = send_all(second.endpoint, messages)  # the simulation runs again, whole
        after = steps_of(drain(restored))
        ctx.term()
    finally:
        second.stop()
    assert sorted(before + after) == list(range(steps))  # each step exactly once
