"""A closing client whose trainer stopped before its first RECEIPT_QUERY (external
mode): its close is answered from the receiver's stop record (docs/protocol.md,
section 17b; `melissa_trainer.stream.stop_record`, `melissa_trainer.client.stopped`).

The race is forced, not timed: the client's first question (`Rounds.wait`) waits until
the receiver has ingested the simulation (its own record says so) and has stopped
(`Receiver.stop` returned: its rendezvous file is marked). The clients' timeouts are
short, so that a close that is not answered from the record fails in seconds (before
the fix: "not confirmed" after `disconnected_timeout` + `follow_timeout`)."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client import receipts as receipts_module
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.stop_record import RECORD_LIMIT, StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.timeout(120)

#: short waits: a close the record does not answer fails within seconds
TUNING = ClientTuning(disconnected_timeout=1.0, follow_timeout=1.0, close_timeout=60.0)
#: shorter still where the close must fail (a record ignored): a record wrongly taken
#: confirms the close at once, whatever these bounds, and the test fails
IGNORED = ClientTuning(disconnected_timeout=0.2, follow_timeout=0.2, close_timeout=60.0)


def stop_before_the_first_question(
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,
    ingested: Any,
    then: Any = None,
) -> None:
    """The client's first RECEIPT_QUERY waits until `ingested(receiver)` is true (polled:
    the receiver's thread ingests), then the receiver stops (its file is marked when
    `stop` returns), then `then()` (a test's change to the file) runs."""
    plain = receipts_module.Rounds.wait
    first = [True]

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        if first[0]:
            first[0] = False
            end = time.monotonic() + 60.0
            while not ingested(receiver):
                assert time.monotonic() < end, "the receiver did not ingest the BYE"
                time.sleep(0.005)
            receiver.stop()
            if then is not None:
                then()
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(receipts_module.Rounds, "wait", wait)


def stopped_entry(rendezvous: Path) -> dict[str, Any]:
    entry = json.loads((rendezvous / "rank_0.json").read_text())
    assert entry["stopped"] is True
    return entry


def test_a_trainer_that_stopped_before_the_first_question_confirms_from_its_record(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = FIFOBuffer(100)
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        stop_before_the_first_question(monkeypatch, receiver, lambda r: r.completed() == [5])
        client = Client(simulation_id=5, fields={"u": ((4,), np.float64)}, tuning=TUNING)
        for t in range(6):
            client.send(t, u=np.full(4, t, np.float64))
        client.close()  # (before the fix: TimeoutError, "not confirmed")
    record = stopped_entry(external)["stop_record"]
    assert record["run_id"] == "run-a" and record["finished"] == [[5, 6, 0]]
    # the oracle: what the receiver put in the buffer, each step exactly once
    items = buffer.get_batch(6, timeout=5)
    assert sorted(int(s["time_step"]) for s in items) == list(range(6))


@pytest.mark.usefixtures("short_receipt_rounds")
def test_a_record_of_another_run_is_ignored(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def another_run() -> None:
        entry = stopped_entry(external)
        assert entry["stop_record"]["finished"] == [[5, 3, 0]]  # (what it would confirm)
        entry["stop_record"]["run_id"] = "run-b"
        (external / "rank_0.json").write_text(json.dumps(entry))

    with running(rendezvous_dir=external, run_id="run-a") as receiver:
        stop_before_the_first_question(
            monkeypatch, receiver, lambda r: r.completed() == [5], another_run
        )
        client = Client(simulation_id=5, fields={"u": ((4,), np.float64)}, tuning=IGNORED)
        for t in range(3):
            client.send(t, u=np.zeros(4))
        with pytest.raises(TimeoutError, match="its BYE was not confirmed"):
            client.close()


@pytest.mark.usefixtures("short_receipt_rounds")
@pytest.mark.parametrize("garbage", ["record", "file"])
def test_a_garbage_record_is_ignored_with_a_warning(
    external: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    garbage: str,
) -> None:
    def spoil() -> None:
        entry = stopped_entry(external)
        assert entry["stop_record"]["finished"] == [[5, 3, 0]]  # (what it would confirm)
        if garbage == "record":
            entry["stop_record"]["finished"] = [[5, "3", 0]]
            (external / "rank_0.json").write_text(json.dumps(entry))
        else:  # (truncated: unreadable, as a file being replaced)
            text = (external / "rank_0.json").read_text()
            (external / "rank_0.json").write_text(text[: len(text) // 2])

    with running(rendezvous_dir=external, run_id="run-a") as receiver:
        stop_before_the_first_question(monkeypatch, receiver, lambda r: r.completed() == [5], spoil)
        client = Client(simulation_id=5, fields={"u": ((4,), np.float64)}, tuning=IGNORED)
        for t in range(3):
            client.send(t, u=np.zeros(4))
        with (
            caplog.at_level(logging.WARNING, "melissa_trainer.client"),
            pytest.raises(TimeoutError, match="its BYE was not confirmed"),
        ):
            client.close()
    warned = [r.getMessage() for r in caplog.records if "stop record" in r.getMessage()]
    assert (len(warned) == 1) == (garbage == "record"), warned
    if warned:
        assert "is not valid (finished: bad row" in warned[0]


def test_a_trainer_that_ended_without_the_bye_says_why_at_once(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the trainer ended (max_steps reached) before it read this simulation: its record is
    # complete and lacks it; the close fails at once naming why, without waiting
    # disconnected_timeout (10 minutes here: before the fix, the test's timeout)
    # (a buffer of 1, never read: the receiver takes the HELLO and the first step, and
    # waits for room with the others and the BYE unread)
    full = FIFOBuffer(1)
    with running(buffer=full, rendezvous_dir=external, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("end", "max_steps 7 reached"))
        stop_before_the_first_question(monkeypatch, receiver, lambda r: r.backpressured())
        tuning = ClientTuning(disconnected_timeout=600.0, follow_timeout=1.0)
        client = Client(simulation_id=4, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(3):
            client.send(t, u=np.zeros(4))
        with pytest.raises(TimeoutError, match=r"stopped before it read it \(end: max_steps 7"):
            client.close()


def ledger(completed: int, finished: bool, byes: dict[int, int]) -> SimpleNamespace:
    done = bytearray(np.packbits(np.ones(completed, bool), bitorder="little"))  # (steps 0 ..)
    return SimpleNamespace(completed=completed, finished=finished, byes=byes, done=done)


def test_a_record_is_bounded_and_round_trips() -> None:
    many = RECORD_LIMIT + 10
    ingest = SimpleNamespace(
        finished_ids=list(range(many)),
        sims={many: ledger(3, False, {0: 3, 1: 2}), 2: ledger(9, True, {})},
        archive=SimpleNamespace(steps={i: 4 for i in range(many)}),
        nonfinite=SimpleNamespace(by_simulation={many: 1, many - 1: 9}),
        expected=None,  # (no expected_simulations: no ``expected_end``)
        unfinished=lambda: [many],  # (`IngestState.unfinished`: not finished, not given up)
        rank=0,
        world=1,
        shifted=set(),
    )
    reason = StopReason("nonfinite", "NaN", simulation_id=7, time_step=3)
    record = parse_record(json.loads(json.dumps(build_record(ingest, "run-a", reason))))
    assert len(record.finished) == RECORD_LIMIT and not record.complete
    assert record.finished[many - 1] == (4, 4)  # (refused: at most the steps held)
    assert record.byes == {(many, 0): (3, 3, 1), (many, 1): (2, 3, 1)}
    assert (record.reason.simulation_id, record.reason.time_step) == (7, 3)
    for broken, words in [
        ({}, "not a stop record of version 1"),
        ({"version": 1, "run_id": "run a"}, "run_id must be 1 to 64 ASCII letters"),
        ({"version": 1, "run_id": None, "reason": {"code": "nonfinite", "message": "x"}},
         "a nonfinite reason names no simulation and time step"),
        ({"version": 1, "run_id": None, "reason": {"code": "end", "message": "x"},
          "finished": [[1, 2, 3]], "byes": [], "complete": True},
         r"finished \[1, 2, 3\]: more refused than held"),
        ({"version": 1, "run_id": None, "reason": {"code": "end", "message": "x"},
          "finished": [], "byes": [[1, 2, 3, 4, -1]], "complete": True},
         r"byes: bad row \[1, 2, 3, 4, -1\]"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=words):
            parse_record(broken)


def test_a_simulation_whose_nan_stopped_the_trainer_is_refused_naming_the_step(
    external: Path,
) -> None:
    # nonfinite="fail" with no launcher: the receiver fails on the NaN of time step 2,
    # the trainer stops; the close says why at once (before the fix: "the trainer died,
    # or its node", after disconnected_timeout)
    with running(rendezvous_dir=external, run_id="run-a", nonfinite="fail") as receiver:
        client = Client(simulation_id=8, fields={"u": ((4,), np.float64)}, tuning=TUNING)
        for t in range(4):
            client.send(t, u=np.full(4, np.nan if t == 2 else t, np.float64))
        with pytest.raises(SimulationRefused) as caught:

            def stop_on_failure() -> None:  # (what the trainer does: `check` raises)
                end = time.monotonic() + 60
                while time.monotonic() < end:
                    try:
                        receiver.check()
                    except Exception:
                        receiver.stop()
                        return
                    time.sleep(0.005)

            stopper = threading.Thread(target=stop_on_failure, daemon=True)
            stopper.start()
            client.close()
        stopper.join(30)
    said = str(caught.value)
    assert "stopped on its time step 2" in said and "nonfinite='fail'" in said, said
    assert "--nonfinite refuse" in said and "MELISSA_TRAINER_SIMULATION_ID=8" in said, said


def test_messages_that_cannot_reach_a_trainer_that_ended_fail_at_once_naming_why(
    external: Path,
) -> None:
    # the trainer ended (max_steps) while this simulation streams: its next steps and BYE
    # cannot be delivered; the close says why at once, and does not wait for a restarted
    # trainer (disconnected_timeout 10 minutes here: before the fix, the test's timeout)
    tuning = ClientTuning(disconnected_timeout=600.0, follow_timeout=600.0)
    with running(rendezvous_dir=external, run_id="run-a") as receiver:
        client = Client(simulation_id=6, fields={"u": ((4,), np.float64)}, tuning=tuning)
        client.send(0, u=np.zeros(4))
        deadline = time.monotonic() + 60
        while 6 not in receiver.ingest.sims:  # (connected, its HELLO ingested)
            assert time.monotonic() < deadline
            time.sleep(0.005)
        receiver.note_stop(StopReason("end", "max_steps 9 reached"))
        receiver.stop()
        client.send(1, u=np.ones(4))
        with pytest.raises(TrainerStopped) as caught:
            client.close()
    # one sentence, the reason first (before: "queued messages not delivered to ...: the
    # trainer stopped before it read them"), keeping what was not delivered, where, the
    # record's reason and path, and the fix
    # (and the steps the record held of those sent: step 0, if it was ingested before
    # the stop, which this test does not wait for)
    said = str(caught.value)
    opening = (
        "simulation 6 rank 0: the trainer stopped before it read its queued messages "
        f"(the BYE among them), which were not delivered to {client.endpoints[0]} "
        f"(end: max_steps 9 reached; its stop record in {external}; it had taken "
    )
    assert re.match(
        re.escape(opening) + r"[01] of the 2 time steps this simulation sent it\)\. ", said
    ), said
    assert said.count("not delivered") == 1, said
    # (the run ended: no resume advice, a trainer resumed from an end stops at once)
    assert said.endswith(ENDED) and "resume_from_checkpoint" not in said, said
