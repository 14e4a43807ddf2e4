"""A restarted simulation overtaking the messages its failed attempt left queued.

A simulation that dies without BYE is restarted and sends every step again. The
receiver's PULL socket fair-queues its connections (ZeroMQ keeps the order of each
connection, not an order between them), so a back-pressured receiver may read the
restart's messages, its BYE included, before the failed attempt's last messages still
queued in the socket. The simulation then finishes on the restart's copies, and the
failed attempt's messages read later are dropped: as duplicates while the stream runs,
unread (``ignored_after_end``) once it has ended. Nothing is lost and nothing is put
twice either way. This is the order that made
tests/trainer/test_nonfinite.py::test_refuse_drops_counts_and_logs_nan_samples_once_even_when_resent
fail once (its oracle assumed the failed attempt was read first); here it is forced:
the failed attempt's last messages are sent only once the restart has finished it.

Oracles: the messages are written by `reference_protocol` (the document's encoder, not
the library's), which steps hold NaN is chosen here, and the samples are read back
from the buffer.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import drain, handled, running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

SID, OTHER, STEPS, NAN_FROM, SENT_BEFORE = 1, 2, 20, 15, 10
FIELDS = [R.Field("x", "<f4", (3,)), R.Field("y", "<f4", (1,))]


def row(f: R.Field, t: int) -> np.ndarray:
    """Field `f` of step `t`, the same in every attempt; x holds NaN from NAN_FROM."""
    x = np.array([1.0, 2.0, t], np.float32)
    if t >= NAN_FROM:
        x[1] = np.nan  # the solver diverged
    return x if f.name == "x" else np.array([t], np.float32)


def hello(sim: int) -> bytes:
    return R.encode_hello(sim, 0, 1, R.hello_body(FIELDS, {"a": 1.0}))


def batches(sim: int, steps: range) -> list[bytes]:
    """One BATCH per field of `steps`, as a client sends them (no FLAG_FINITE)."""
    out = []
    for f in FIELDS:
        head = R.part_header(R.BATCH, sim, len(steps), 0, 1, f, 0, f.size, False)
        out.append(head + b"".join(t.to_bytes(8, "little") + row(f, t).tobytes() for t in steps))
    return out


def messages(rec: Receiver) -> int:
    return int(rec.telemetry()["messages"])


def failed_attempt_overtaken(rec: Receiver, attempt0: zmq.Socket, attempt1: zmq.Socket) -> None:
    """Simulation SID's attempt 0 sends its HELLO and steps [0, SENT_BEFORE), which the
    receiver reads; its restart then sends every step and BYE, and finishes it; only
    then are attempt 0's other steps read (its last messages, queued behind)."""
    for frame in [hello(SID), *batches(SID, range(SENT_BEFORE))]:
        attempt0.send(frame)
    wait_until(lambda: messages(rec) == 3, "the condition", 10.0)
    for frame in [hello(SID), *batches(SID, range(STEPS)), R.encode_bye(SID, 0, 1, STEPS)]:
        attempt1.send(frame)
    wait_until(lambda: SID in rec.finished_simulations(), "the condition", 10.0)
    assert rec.describe(SID).endswith(f"has all its {STEPS} steps")
    for frame in batches(SID, range(SENT_BEFORE, STEPS)):
        attempt0.send(frame)
    # handled, not only read: the caller reads the duplicates the last one counts
    wait_until(lambda: handled(rec) == 3 + 4 + 2, "attempt 0's last messages handled", 30.0)


def keys_of(samples: list[dict[str, np.ndarray]]) -> list[tuple[int, int]]:
    return sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)


def pushes(rec: Receiver, n: int) -> tuple[zmq.Context, list[zmq.Socket]]:
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(n)]
    for s in socks:
        s.connect(rec.endpoint or "")
    return ctx, socks


def close(ctx: zmq.Context, socks: list[zmq.Socket]) -> None:
    for s in socks:
        s.close(linger=0)
    ctx.term()


@pytest.mark.timeout(60)
def test_a_failed_attempts_messages_read_after_its_restart_finished_are_duplicates() -> None:
    """The stream still runs (another simulation is expected): the failed attempt's
    late records are counted as duplicates, two a step (x and y), the refused NaN
    steps too; nothing is put twice, the NaN steps are refused once."""
    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=2) as rec:
        ctx, (attempt0, attempt1, other) = pushes(rec, 3)
        try:
            failed_attempt_overtaken(rec, attempt0, attempt1)
            tel = rec.telemetry()
            assert tel["ignored_after_end"] == 0 and not rec.ended
            # every record of attempt 0 was read, each a second copy: 2 a step
            assert tel["duplicates"] == 2 * STEPS
            assert tel["nonfinite_refused"] == STEPS - NAN_FROM
            for frame in [hello(OTHER), *batches(OTHER, range(3)), R.encode_bye(OTHER, 0, 1, 3)]:
                other.send(frame)
            samples = drain(buf)
        finally:
            close(ctx, [attempt0, attempt1, other])
    expected = [(SID, t) for t in range(NAN_FROM)] + [(OTHER, t) for t in range(3)]
    assert keys_of(samples) == expected
    tel = rec.telemetry()
    assert tel["samples_put"] == len(expected) and tel["simulations_finished"] == 2
    assert tel["nonfinite_refused"] == STEPS - NAN_FROM  # not again from the late copies


@pytest.mark.timeout(60)
def test_a_failed_attempts_messages_read_after_the_end_are_ignored_nothing_lost() -> None:
    """The restart finished the last simulation expected: the stream has ended, and the
    failed attempt's late messages are read and ignored (counted per message, not
    decoded); their records are not duplicates, and every sample was put once: the
    study's duplicate count is then short of two a step by those records."""
    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=1) as rec:
        ctx, socks = pushes(rec, 2)
        try:
            failed_attempt_overtaken(rec, *socks)
            samples = drain(buf)
        finally:
            close(ctx, socks)
    assert rec.ended
    assert keys_of(samples) == [(SID, t) for t in range(NAN_FROM)]
    tel = rec.telemetry()
    assert tel["ignored_after_end"] == 2  # attempt 0's BATCH of x and of y
    assert tel["duplicates"] == 2 * SENT_BEFORE  # only the records read before the end
    assert tel["samples_put"] == NAN_FROM and tel["simulations_finished"] == 1
    assert tel["nonfinite_refused"] == STEPS - NAN_FROM
