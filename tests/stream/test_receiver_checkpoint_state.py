"""The stream receiver's checkpointed state: its dedup record survives a JSON round trip, a
version-1 state is read (several receivers' or one's), unknown versions and another
rank's state are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import drain, running
from receiver_runs import U, _feed, _ingest, check_stream, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


@pytest.mark.timeout(30)
def test_dedup_record_survives_a_json_round_trip(tmp_path: Path) -> None:
    buf = FIFOBuffer(20)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 3.0})])
        for t in range(5):
            send(s, data(1, t, U, value(1, t, U)))
        wait_until(lambda: len(buf) == 5, "the condition", UNTIL_TEST_TIMEOUT)
        buf.save(tmp_path / "buf")  # the trainer saves the buffer, then the source
        send(s, data(1, 5, U, value(1, 5, U)))  # put after the buffer snapshot
        wait_until(lambda: len(buf) == 6, "the condition", UNTIL_TEST_TIMEOUT)
        state = json.loads(json.dumps(rec.state_dict()))
    assert state["simulations"]["1"]["parameters"] == [["a", 3.0]]
    assert state["marked"] == 6
    restored = FIFOBuffer(20)
    restored.load(tmp_path / "buf")
    rec2 = Receiver(restored, config=ReceiverConfig(expected_simulations=1))
    rec2.load_state_dict(state)
    assert rec2.state_dict() == state  # before start: what was loaded
    rec2.start()
    try:
        # counters continue, less step 5: put after the buffer's snapshot, it is not in
        # the restored buffer and is counted when it is put again
        assert rec2.telemetry()["samples_put"] == 5
        with pushes(rec2.endpoint) as (s,):  # the simulation restarts: everything again
            send(s, [P.encode_hello(1, 0, 1, [U], {"a": 3.0})])
            for t in range(8):
                send(s, data(1, t, U, value(1, t, U)))
            send(s, [P.encode_bye(1, 0, 1, 8)])
            samples = drain(restored)
        assert tel(rec2, "duplicates") == 5  # steps 0-4; step 5 was not in the buffer's snapshot
        assert tel(rec2, "samples_put") == 8  # each step once (it said 9)
        assert rec2.state_dict()["simulations"]["1"]["finished"] is True
    finally:
        rec2.stop()
    check_stream(samples, {1: (range(8), [U], {"a": 3.0})})


def _version_1_state(world: int) -> dict[str, Any]:
    """Rank 0 of `world` got steps 0 and `world` of simulation 1, whose client (the only
    one) said BYE after 4 steps: a version-1 state, BYE counted over all receivers."""
    ing, _, _ = _ingest(0, world)
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in (0, world):
        _feed(ing, data(1, t, U, value(1, t, U)))
    state = json.loads(json.dumps(ing.state_dict()))
    state["version"] = 1
    state["simulations"]["1"]["byes"] = {"0": 4}
    return state


@pytest.mark.timeout(30)
def test_a_version_1_state_of_several_receivers_counts_this_receivers_steps() -> None:
    """Protocol 1's BYE counted steps over all receivers (4 here): read as version 2's
    count, rank 0 of 2 would wait for 4 steps of its own and never finish. Upgraded, it
    counts the steps of rank 0 among 4 (0 and 2), has both, and finishes at start."""
    buf = FIFOBuffer(8)
    for t in (0, 2):  # the buffer restored with the state holds both samples
        buf.put({"u": value(1, t, U), "time_step": np.array(t)})
    rec = Receiver(buf, 0, 2, ReceiverConfig(expected_simulations=1))
    rec.load_state_dict(_version_1_state(2))
    loaded = rec.state_dict()
    assert loaded["version"] == 4 and loaded["simulations"]["1"]["byes"] == {"0": 2}
    rec.start()
    try:
        wait_until(
            lambda: rec.ended, "the condition", UNTIL_TEST_TIMEOUT
        )  # no message needed: the stream is over
    finally:
        rec.stop()
    assert rec.finished_simulations() == [1]


def test_a_version_1_state_of_one_receiver_is_kept_and_unknown_versions_refused() -> None:
    state = _version_1_state(1)
    rec = Receiver(FIFOBuffer(8))
    rec.load_state_dict(state)
    assert rec.state_dict()["simulations"]["1"]["byes"] == {"0": 4}  # the same meaning
    with pytest.raises(ValueError, match="unknown receiver state version 7"):
        Receiver(FIFOBuffer(8)).load_state_dict(dict(state, version=7))


def test_state_of_another_rank_is_refused() -> None:
    rec = Receiver(FIFOBuffer(4), rank=1, world_size=2)
    state = rec.state_dict()
    with pytest.raises(ValueError, match="rank 1 of 2"):
        Receiver(FIFOBuffer(4)).load_state_dict(state)
