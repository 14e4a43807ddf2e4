"""A solver started beyond the trainer's ``expected_simulations`` (external mode: three
solvers for a trainer given 2) is told, at its close, that the study ended without
needing it, what the trainer took of it and what to do: `SimulationNotNeeded`, not the
"the trainer stopped before it read it ... resume the trainer and run this simulation
again" of a trainer that failed (docs/protocol.md, section 17b; `client.stopped`).

The receivers are in-process and real (sockets, ingest, rendezvous file); the third
solver's close is forced to meet the stopped receiver (its record), not timed. The
oracle for what was taken is the buffer: the samples of that simulation it holds."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, SimulationNotNeeded
from melissa_trainer.client import receipts as receipts_module
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.stop_record import StopReason
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.timeout(120)

#: long waits: a close the record does not answer would reach the test's timeout
TUNING = ClientTuning(disconnected_timeout=600.0, follow_timeout=600.0, close_timeout=600.0)
FIELDS = {"u": ((4,), np.float64)}


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def two_finish(receiver: Receiver) -> None:
    """Simulations 0 and 1 stream 4 steps each and close: the stream ends (2 expected)."""
    for sid in (0, 1):
        with Client(simulation_id=sid, fields=FIELDS, tuning=TUNING) as client:
            for t in range(4):
                client.send(t, u=np.full(4, t, np.float64))
    until(lambda: receiver.ended, "the stream did not end")


def the_trainer_stops_at_the_first_question(
    monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    """What the trainer does once its stream ended (`end_training`), just before the
    closing client's first RECEIPT_QUERY (the client then reads the record)."""
    plain = receipts_module.Rounds.wait
    first = [True]

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        if first[0]:
            first[0] = False
            receiver.note_stop(StopReason("end", "end of stream"))
            receiver.stop()
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(receipts_module.Rounds, "wait", wait)


def samples_of(buffer: FIFOBuffer, sid: int) -> int:
    items = buffer.get_batch(100, timeout=0.0)
    return sum(int(s["simulation_id"]) == sid for s in items)


def test_a_solver_beyond_expected_simulations_is_told_the_study_did_not_need_it(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = FIFOBuffer(100)
    with running(
        buffer=buffer, rendezvous_dir=external, run_id="run-a", expected_simulations=2
    ) as receiver:
        third = Client(simulation_id=7, fields=FIELDS, tuning=TUNING)
        for t in range(3):
            third.send(t, u=np.zeros(4))
        until(lambda: receiver.ingest.samples_put == 3, "the third's steps not ingested")
        two_finish(receiver)
        third.send(3, u=np.zeros(4))  # (ignored: after the end)
        the_trainer_stops_at_the_first_question(monkeypatch, receiver)
        with pytest.raises(SimulationNotNeeded) as caught:
            third.close()  # (before: TimeoutError, "stopped before it read it ...")
    said = str(caught.value)
    assert said.startswith("simulation 7 rank 0: the study ended without needing this simulation")
    assert "expected_simulations=2 and that many had ended (2 finished, 0 abandoned)" in said
    taken = samples_of(buffer, 7)  # the oracle: what the receiver put in the buffer
    assert taken == 3
    assert f"had taken {taken} of this simulation's time steps (trained on)" in said
    assert "there is nothing to do" in said and "expected_simulations equal to" in said
    assert "--resume_from_checkpoint" not in said  # (nothing to resume: the study is done)
    assert isinstance(caught.value, TrainerStopped) and isinstance(caught.value, TimeoutError)


def test_a_solver_whose_messages_cannot_reach_the_ended_trainer_is_told_too(
    external: Path,
) -> None:
    """Its BYE is queued towards a receiver that stopped (the transport's close fails on
    the record, `StopRecords.for_good`); nothing of it reached the receiver."""
    buffer = FIFOBuffer(100)
    with running(
        buffer=buffer, rendezvous_dir=external, run_id="run-a", expected_simulations=2
    ) as receiver:
        two_finish(receiver)
        late = Client(simulation_id=9, fields=FIELDS, tuning=TUNING)  # (after the end)
        receiver.note_stop(StopReason("end", "end of stream"))
        # (sent while its receiver is connected: a send once it is seen down fails on
        # the record itself, test_send_learns_stop.py; this is the close's)
        late.send(0, u=np.zeros(4))
        receiver.stop()
        with pytest.raises(SimulationNotNeeded) as caught:
            late.close()
    said = str(caught.value)
    # one sentence, the reason first (before: "queued messages not delivered to ...: the
    # study ended..."), keeping what was not delivered, where, the facts and the fix
    assert said.startswith(
        "simulation 9 rank 0: the study ended without needing this simulation, so its "
        f"queued messages (the BYE among them) were not delivered to {late.endpoints[0]}: "
        "the trainer was given expected_simulations=2"
    ), said
    assert said.count("not delivered") == 1, said
    assert samples_of(buffer, 9) == 0
    assert "had taken nothing of this simulation" in said
    assert f"its stop record in {external}" in said, said
    assert "catch SimulationNotNeeded" in said and "expected_simulations equal to" in said


def test_a_trainer_that_ended_otherwise_still_says_so(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that did not end on expected_simulations (max_steps: the record has no
    ``expected_end``) keeps its message: the trainer stopped before it read this BYE."""
    # (a buffer of 1, never read: the receiver takes the first step and waits for room,
    # the other steps and the BYE unread, as the existing test of this message does)
    full = FIFOBuffer(1)
    with running(
        buffer=full, rendezvous_dir=external, run_id="run-a", expected_simulations=5
    ) as receiver:
        client = Client(simulation_id=3, fields=FIELDS, tuning=TUNING)
        for t in range(3):
            client.send(t, u=np.zeros(4))
        until(receiver.backpressured, "the receiver is not waiting for room")
        plain = receipts_module.Rounds.wait
        first = [True]

        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            if first[0]:
                first[0] = False
                receiver.note_stop(StopReason("end", "max_steps 7 reached"))
                receiver.stop()
            return plain(self, *args, **kwargs)

        monkeypatch.setattr(receipts_module.Rounds, "wait", wait)
        with pytest.raises(TimeoutError) as caught:
            client.close()
    assert not isinstance(caught.value, SimulationNotNeeded)
    assert "max_steps 7 reached" in str(caught.value)
    entry = json.loads((external / "rank_0.json").read_text())
    assert "expected_end" not in entry["stop_record"]


def test_the_record_says_what_each_unfinished_simulation_gave(external: Path) -> None:
    with running(rendezvous_dir=external, run_id="run-a", expected_simulations=2) as receiver:
        third = Client(simulation_id=7, fields=FIELDS, tuning=TUNING)
        for t in range(3):
            third.send(t, u=np.zeros(4))
        until(lambda: receiver.ingest.samples_put == 3, "not ingested")
        two_finish(receiver)
        receiver.stop()
        third.close(bye=False)
    record = parse_record(json.loads((external / "rank_0.json").read_text())["stop_record"])
    assert record.expected_end is not None
    assert (record.expected_end.expected_simulations, record.expected_end.finished) == (2, 2)
    assert record.expected_end.unfinished == {7: (3, 0)}
    assert record.complete and record.reason.code == "stopped"


@pytest.mark.parametrize(
    "ended",
    [
        [],
        {"expected_simulations": 2, "finished": 2, "abandoned": -1, "unfinished": []},
        {"expected_simulations": 2, "finished": 2, "abandoned": 0, "unfinished": [[7, 1, 2]]},
        {"expected_simulations": 2, "finished": 2, "abandoned": 0},
    ],
)
def test_a_bad_expected_end_makes_the_record_invalid(ended: Any) -> None:
    record = {"version": 1, "run_id": None, "reason": {"code": "end", "message": "x"},
              "finished": [], "byes": [], "complete": True, "expected_end": ended}  # fmt: skip
    with pytest.raises(ValueError, match="expected_end"):
        parse_record(record)
