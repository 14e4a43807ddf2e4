"""Abandoned simulations count as ended once and keep their samples (one abandoned then
finishing is not counted twice); ABANDON is a 16-byte prefix; the activity count
includes duplicates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import drain, running
from receiver_runs import U, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.ingest import Ingest


@pytest.mark.timeout(30)
def test_abandoned_simulations_count_as_ended_once_and_keep_their_samples(
    tmp_path: Path,
) -> None:
    from melissa_trainer.stream.control import send_abandon

    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=3, rendezvous_dir=tmp_path) as rec:
        with pushes(rec.endpoint) as (s,):
            for sim in (1, 2):
                send(s, [P.encode_hello(sim, 0, 1, [U])])
                send(s, data(sim, 0, U, value(sim, 0, U)))
            send(s, [P.encode_bye(1, 0, 1, 1)])  # 1 finished; 2 died after one step
            wait_until(
                lambda: rec.finished_simulations() == [1], "the condition", UNTIL_TEST_TIMEOUT
            )
            send_abandon([rec.endpoint], 2)
            send_abandon([rec.endpoint], 2)  # twice: counted once
            send_abandon([rec.endpoint], 1)  # already finished: not counted
            wait_until(
                lambda: tel(rec, "simulations_abandoned") == 1, "the condition", UNTIL_TEST_TIMEOUT
            )
            assert not buf.closed  # 1 finished + 1 abandoned < 3
            send_abandon([rec.endpoint], 7)  # died before its HELLO
            samples = drain(buf)  # ends: 1 finished + 2 abandoned
        assert sorted((int(x["simulation_id"]), int(x["time_step"])) for x in samples) == [
            (1, 0),
            (2, 0),
        ]
        assert tel(rec, "simulations_abandoned") == 2
        assert tel(rec, "simulations_finished") == 1
        assert tel(rec, "rejected") == 0
        assert sorted(rec.state_dict()["abandoned"]) == [2, 7]


def test_abandon_is_a_16_byte_prefix_and_other_sizes_are_rejected() -> None:
    frame = P.encode_abandon(42)
    assert len(frame) == 16 and frame[5] == P.ABANDON
    assert P.decode(frame) == P.Abandon(42)
    with pytest.raises(P.ProtocolError) as err:
        P.decode(frame + b"\0")
    assert err.value.reason == "bad_size"


def test_a_simulation_abandoned_then_finishing_is_not_counted_twice() -> None:
    ends: list[str] = []
    ing = Ingest(
        0,
        1,
        put=lambda s: True,
        end=ends.append,
        expected=2,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 10,
        recent_size=8,
    )
    ing.hello(P.decode(P.encode_hello(1, 0, 1, [U])))
    ing.abandon(P.Abandon(1))
    ing.data(P.decode(data(1, 0, U, value(1, 0, U))[0]), True)
    ing.bye(P.decode(P.encode_bye(1, 0, 1, 1)))
    assert ing.simulations_finished == 1 and ing.simulations_abandoned == 0
    assert ends == []  # 1 ended of 2 expected
    assert ing.activity() == {1: 1}


@pytest.mark.timeout(30)
def test_activity_counts_data_messages_per_simulation_duplicates_included() -> None:
    with running() as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(5, 0, 1, [U])])
        for t in (0, 1, 1):
            send(s, data(5, t, U, value(5, t, U)))
        wait_until(lambda: tel(rec, "messages") == 4, "the condition", UNTIL_TEST_TIMEOUT)
        assert rec.activity() == {5: 3}
