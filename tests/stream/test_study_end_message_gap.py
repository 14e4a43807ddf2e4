"""A receiver told that the study has ended (STUDY_END, `stream.study_end`): real sockets.

The gap: a rank other than 0 that lacks the data of a simulation the launcher counts
finished was told nothing and waited in silence until its stall timeout (600 s). Told
which simulations are finished, it now fails within `study_end_grace` naming what it
lacks, its rank and the fix; or, lacking none of them, its stream ends. A malformed
STUDY_END is rejected and counted like any bad message; one read after the stream
ended is not an ``ignored_after_end``.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import drain, running
from receiver_runs import failure, push
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.control import send_study_end
from melissa_trainer.stream.receiver_config import ReceiverTuning
from melissa_trainer.wire.messages import StudyEnd
from melissa_trainer.wire.study_end import STUDY_END, decode_study_end, encode_study_end

X = P.FieldSpec("x", np.dtype("<f4"), (2,))
#: a grace short enough for a unit test (the default is 2 s)
FAST = ReceiverTuning(study_end_grace=0.05)


def simulation(sid: int, rank: int, world: int, steps: int = 4) -> list[bytes]:
    """The messages simulation `sid` sends to rank `rank` of `world` (its share of the
    steps, round robin, between HELLO and BYE)."""
    frames = [P.encode_hello(sid, 0, 1, [X])]
    mine = range(rank, steps, world)
    for t in mine:
        head = P.encode_data_header(sid, t, 0, 1, b"x", P.dtype_code(X.dtype), X.shape, 0, 2, True)
        frames.append(head + np.array([sid, t], "<f4").tobytes())
    frames.append(P.encode_bye(sid, 0, 1, len(mine)))
    return frames


def test_the_message_round_trips_and_its_ids_are_sorted_once() -> None:
    frame = encode_study_end([5, 0, 3, 3])
    assert frame[P.KIND_AT] == STUDY_END
    msg = P.decode(frame)
    assert isinstance(msg, StudyEnd)
    assert msg.finished.tolist() == [0, 3, 5]
    assert P.decode(encode_study_end([])).finished.tolist() == []
    with pytest.raises(ValueError, match="simulation id is >= 0"):
        encode_study_end([-1])


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (encode_study_end([1, 2, 3])[:-8], "bad_size"),  # says 3 ids, holds 2
        (encode_study_end([1, 2]) + bytes(3), "bad_size"),
        (
            P.PREFIX.pack(P.MAGIC, P.VERSION, STUDY_END, 0, 2) + np.array([3, 1], "<u8").tobytes(),
            "bad_range",
        ),  # fmt: skip
        (
            P.PREFIX.pack(P.MAGIC, P.VERSION, STUDY_END, 0, 2) + np.array([1, 1], "<u8").tobytes(),
            "bad_range",
        ),  # fmt: skip
        (
            P.PREFIX.pack(P.MAGIC, P.VERSION, STUDY_END, 0, 1) + np.array([2**63], "<u8").tobytes(),
            "bad_range",
        ),  # fmt: skip
        (P.PREFIX.pack(P.MAGIC, P.VERSION, STUDY_END, 0, 1 << 40), "too_large"),
    ],
)
def test_a_malformed_study_end_is_refused_by_reason(frame: bytes, reason: str) -> None:
    with pytest.raises(P.ProtocolError) as info:
        P.decode(frame, max_message_bytes=1 << 20)
    assert info.value.reason == reason
    with pytest.raises(P.ProtocolError, match=f"^{reason}: "):
        decode_study_end(frame, len(frame), P.PREFIX.unpack_from(frame)[4], 1 << 20)


@pytest.mark.timeout(30)
def test_a_rank_that_lacks_a_finished_simulation_fails_naming_it_and_the_fix() -> None:
    """Rank 1 of 2 got nothing of simulation 1 (its messages lost); simulations 0 and 2
    are complete there. Told that 0, 1 and 2 are finished, it fails at once past its
    grace: its rank, the simulation, what it has of it, and the resume that reruns it."""
    buf = FIFOBuffer(100)
    with running(buf, rank=1, world_size=2, expected_simulations=3, tuning=FAST) as rec:
        push(rec.endpoint, simulation(0, 1, 2) + simulation(2, 1, 2))
        wait_until(lambda: rec.telemetry()["simulations_finished"] == 2, "simulations 0 and 2")
        assert failure(rec) is None  # (waits for a third simulation: silently, before)
        send_study_end([rec.endpoint], [0, 1, 2])
        wait_until(lambda: failure(rec) is not None, "rank 1's failure", UNTIL_TEST_TIMEOUT)
        message = failure(rec)
        # the reader is woken: `check` tells it why (the error is stored first, then the
        # buffer closed, so that a reader woken by the close finds it: a wait, not a read)
        wait_until(lambda: buf.closed, "the buffer closed", UNTIL_TEST_TIMEOUT)
    assert message is not None
    assert "the stream receiver of rank 1 failed: the study has ended" in message
    assert "rank 1 lacks the data of 1 of the 3 simulations whose process ended" in message
    assert "with exit 0 (simulation 1; none is run again)" in message
    assert "simulation 1: rank 1's receiver has no HELLO from it" in message
    assert "A run resumed from a checkpoint runs it again" in message


@pytest.mark.timeout(30)
def test_a_rank_part_way_through_a_simulation_names_what_it_has() -> None:
    buf = FIFOBuffer(100)
    with running(buf, rank=1, world_size=2, expected_simulations=2, tuning=FAST) as rec:
        push(rec.endpoint, simulation(0, 1, 2) + simulation(1, 1, 2)[:2])  # HELLO, one step
        wait_until(lambda: rec.telemetry()["samples_put"] == 3, "the steps sent")
        send_study_end([rec.endpoint], [0, 1])
        wait_until(lambda: failure(rec) is not None, "rank 1's failure", UNTIL_TEST_TIMEOUT)
        message = failure(rec)
    assert message is not None
    said = "simulation 1: rank 1's receiver has 1 of an unannounced number of steps, BYE from 0"
    assert said + " of 1" in message


@pytest.mark.timeout(30)
def test_a_rank_that_lacks_none_of_them_ends_its_stream() -> None:
    """Rank 1 expects 3 simulations but the study ended with 2 finished (the third's
    ABANDON never reached it): told, it ends; every sample it had is read."""
    buf = FIFOBuffer(100)
    with running(buf, rank=1, world_size=2, expected_simulations=3, tuning=FAST) as rec:
        push(rec.endpoint, simulation(0, 1, 2) + simulation(1, 1, 2))
        wait_until(lambda: rec.telemetry()["simulations_finished"] == 2, "simulations 0 and 1")
        send_study_end([rec.endpoint], [0, 1])
        samples = drain(buf, timeout=20.0)  # returns at the end of the stream
        assert rec.ended
        rec.check()
    got = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert got == [(0, 1), (0, 3), (1, 1), (1, 3)]


@pytest.mark.timeout(30)
def test_malformed_ones_are_counted_and_one_after_the_end_is_not_ignored_data() -> None:
    buf = FIFOBuffer(100)
    with running(buf, rank=1, world_size=2, expected_simulations=1, tuning=FAST) as rec:
        bad = encode_study_end([0, 1])[:-8]
        push(rec.endpoint, [bad, *simulation(0, 1, 2)])
        drain(buf, timeout=20.0)  # ended on its own count: the bad one told it nothing
        assert rec.telemetry()["rejected_bad_size"] == 1
        late = rec.telemetry()["messages"]
        send_study_end([rec.endpoint], [0])
        wait_until(lambda: rec.telemetry()["messages"] == late + 1, "the late STUDY_END")
        assert rec.telemetry()["ignored_after_end"] == 0
        rec.check()


@pytest.mark.timeout(30)
def test_a_rank_held_back_by_its_buffer_is_not_judged_until_it_has_read_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rank 0 may send the STUDY_END while this rank's own buffer holds it back (a full
    buffer, simulation 1's data still in its socket): it is told, it lacks simulation 1
    for now, but it must not judge while messages wait (the grace counts empty polls
    only): held back for 40 graces, it neither fails nor ends; read, it has all of it
    and its stream ends (it expects a third simulation: only the STUDY_END ends it)."""
    caplog.set_level("INFO", logger="melissa_trainer.stream.receiver")
    buf = FIFOBuffer(4)
    with running(buf, rank=1, world_size=2, expected_simulations=3, tuning=FAST) as rec:
        # (one connection, read in order: the STUDY_END before simulation 1's data)
        frames = [*simulation(0, 1, 2, steps=2), encode_study_end([0, 1])]
        push(rec.endpoint, frames + simulation(1, 1, 2, steps=40))
        wait_until(
            lambda: "rank 0 says the study has ended" in caplog.text, "told", UNTIL_TEST_TIMEOUT
        )
        assert failure(rec) is None  # (read while simulation 1's data still waited)
        wait_until(rec.backpressured, "held back by its full buffer", UNTIL_TEST_TIMEOUT)
        with pytest.raises(AssertionError):  # (a bounded wait for what must not happen)
            wait_until(lambda: failure(rec) is not None or rec.ended, "a judgment", 40 * 0.05)
        samples = drain(buf, timeout=20.0)
        assert rec.ended
        rec.check()
    assert len(samples) == 1 + 20


@pytest.mark.timeout(30)
def test_a_second_study_end_changes_nothing() -> None:
    """Rank 0 sends one; were a second one read (listing more), the first still holds:
    told [0], having 0, the stream ends, whatever a later one says."""
    buf = FIFOBuffer(100)
    with running(buf, rank=1, world_size=2, expected_simulations=3, tuning=FAST) as rec:
        push(rec.endpoint, [*simulation(0, 1, 2), encode_study_end([0]), encode_study_end([0, 1])])
        drain(buf, timeout=20.0)
        assert rec.ended
        rec.check()
