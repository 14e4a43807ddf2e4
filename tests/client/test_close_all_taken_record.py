"""The stop record's ``unfinished`` (docs/protocol.md, section 2 "The stop record"):
the steps a stopping receiver holds of each simulation begun and not finished there,
and what a close reads of it (`StopRecords.decide`, `StopRecords.all_taken`). A run
that ended (``end``) having taken every step this rank sent, its BYE alone unread,
confirms the close with one warning; fewer taken fail it as before, with the count
taken of the count sent; an older record without the key fails it as before, word for
word. Before, the record held no steps of a simulation without a BYE, and every such
close failed "not taken" (tests/c/test_c_close_all_taken.py, with a real trainer).

The oracle: the records written here (`build_record` of a ledger holding known counts)
and the counts the close is said to have sent."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.receipts import confirmed
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.timeout(30)

EP, RUN, SID = "tcp://127.0.0.1:9", "run-a", 3
WHOSE = f"simulation {SID} rank 0"


def ingest(held: int, refused: int = 0) -> SimpleNamespace:
    """A receiver (the only one) holding `held` steps of simulation SID, 0 .. held - 1
    (`refused` of them refused as non-finite), no BYE of it, and simulation 8 finished
    (4 steps)."""
    done = bytearray(np.packbits(np.ones(held, bool), bitorder="little"))  # (`StepLedger.done`)
    sims = {SID: SimpleNamespace(completed=held, finished=False, byes={}, done=done)}
    return SimpleNamespace(
        rank=0,
        world=1,
        shifted=set(),
        finished_ids=[8],
        sims=sims,
        archive=SimpleNamespace(steps={8: 4}),
        nonfinite=SimpleNamespace(by_simulation={SID: refused} if refused else {}),
        expected=None,
        unfinished=lambda: [SID],
    )


def records(tmp_path: Path, record: dict) -> StopRecords:
    """A stopped receiver's file holding `record`, and the close's reader of it."""
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 1, EP, {"run_id": RUN})
    mark_stopped(rv, 0, EP, record)
    return StopRecords(str(rv), [EP], RUN, SID, 0, WHOSE)


def test_the_record_holds_the_steps_of_each_unfinished_simulation() -> None:
    record = build_record(ingest(5, 2), RUN, StopReason("end", "max_steps 9 reached"))
    assert record["unfinished"] == [[SID, 5, 2, 0, 4]] and record["finished"] == [[8, 4, 0]]
    parsed = parse_record(json.loads(json.dumps(record)))
    assert parsed.unfinished == {SID: (5, 2)} and parsed.unfinished_span == {SID: (0, 4)}
    older = {k: v for k, v in record.items() if k != "unfinished"}
    assert parse_record(older).unfinished is None  # (an older record still parses)
    rows3 = parse_record({**record, "unfinished": [[SID, 5, 2]]})  # (an older trainer's rows)
    assert rows3.unfinished == {SID: (5, 2)} and rows3.unfinished_span == {}
    for bad, words in [
        ([[SID, 5]], r"unfinished: bad row"),
        ([[SID, 1, 2]], "more refused"),
        ([[SID, 5, 0, 4, 0]], "a bad first and last step"),
        ([[SID, 5, 0, 0, 3]], "a bad first and last step"),  # (5 steps in 0 .. 3)
    ]:
        with pytest.raises(ValueError, match=words):
            parse_record({**record, "unfinished": bad})


def test_every_step_taken_confirms_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    said = records(tmp_path, build_record(ingest(5), RUN, StopReason("end", "max_steps 9 reached")))
    assert said.all_taken([5], [(0, 4)]) and not said.all_taken([6], [(0, 5)])
    # (as many steps, other ones: a rerun sending 1 .. 5; fewer sent than held, too)
    assert not said.all_taken([5], [(1, 5)]) and not said.all_taken([4], [(0, 3)])
    with caplog.at_level(logging.WARNING):
        reply = said.decide(0, 5, (0, 4))
    assert reply is not None and confirmed(reply, 5) and reply.steps == 5
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (
        f"{WHOSE}: the trainer's receiver 0 ({EP}) stopped (end: max_steps 9 reached) before "
        f"it read this simulation's BYE, having taken every time step sent it (5): nothing "
        f"was lost. If that run is resumed (a larger --max_steps) with expected_simulations, "
        f"its stream waits for this BYE: then run this simulation again with the same "
        f"simulation id (MELISSA_TRAINER_SIMULATION_ID={SID})"
    ), warning
    assert ENDED[:40] not in warning
    # (what happened, nothing lost, what a resume needs: its own words under 350
    # characters; before, 600, with the stop record's path besides)
    fixed = len(warning) - len(f"{WHOSE}{EP}end: max_steps 9 reached5{SID}")
    assert fixed < 350, fixed


def test_steps_not_taken_fail_with_the_count_taken(tmp_path: Path) -> None:
    said = records(tmp_path, build_record(ingest(2), RUN, StopReason("end", "max_steps 9 reached")))
    assert not said.all_taken([5], [(0, 4)])
    with pytest.raises(DeliveryFailed) as caught:
        said.decide(0, 5, (0, 4))
    text = str(caught.value)
    assert (
        "lacks this BYE; it had taken 2 of the 5 time steps this simulation sent it). " + ENDED
    ) in text, text


@pytest.mark.parametrize("code", ["end", "end3", "error"])
def test_an_older_record_or_a_failure_confirms_nothing(tmp_path: Path, code: str) -> None:
    """An older record (no ``unfinished``, or its rows without the first and last step
    held: ``end3``) fails the close as before; a failure (``error``) with every step
    taken fails it too, saying how many were taken."""
    record = build_record(ingest(5), RUN, StopReason(code[:3] if code != "error" else code, "boom"))
    if code == "end":
        del record["unfinished"]
    if code == "end3":
        record["unfinished"] = [row[:3] for row in record["unfinished"]]
    said = records(tmp_path, record)
    assert not said.all_taken([5], [(0, 4)])
    with pytest.raises(DeliveryFailed) as caught:
        said.decide(0, 5, (0, 4))
    text = str(caught.value)
    assert "its BYE was not confirmed" in text, text
    assert ("it had taken 5 of the 5" in text) == (code != "end"), text
