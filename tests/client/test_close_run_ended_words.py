"""What a close says when its trainer's stop record says the run ended (``end``:
max_steps reached, end of stream, a hook) without this simulation's BYE (a user trial,
htrial19 Xa: a trainer that ended at max_steps 30). It advised to run the simulation
again "once a trainer runs there again (--resume_from_checkpoint latest)", which does
not fit an end: a trainer resumed from it stops at once. Now it says that the run ended
(the record's words) and that the rest of this simulation was not needed, so not
taken: no resume advice. A failure (``error``) keeps it. Failed before the change.

Real sockets on 127.0.0.1; receivers of run ``run-a`` writing their stop record as a
trainer's do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import running
from stopped_receiver import sent_then_stopped
from test_close_stop_record import stop_before_the_first_question

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}
ENDED = "The run ended, so the rest of this simulation was not needed, and not taken"


def close_after(rendezvous: Path, reason: StopReason) -> str:
    """Simulation 6 (external mode, no replay window) sends step 0, taken by a receiver
    that then stops with `reason`; once the client saw it gone, it sends step 1 and
    closes: what the close raises (`TrainerStopped`, the record read while down)."""
    tuning = ClientTuning(disconnected_timeout=30.0, replay_bytes=0)
    client, _ = sent_then_stopped(FIELDS, 6, tuning, rendezvous=rendezvous, reason=reason)
    client.send(1, u=np.zeros(4, np.float32))
    with pytest.raises(TrainerStopped) as caught:
        client.close()
    return str(caught.value)


def test_a_close_to_a_run_that_ended_says_it_ended_without_resume_advice(
    external: Path,
) -> None:
    said = close_after(external, StopReason("end", "max_steps 30 reached"))
    assert said.startswith("simulation 6 rank 0: the trainer stopped before it read "), said
    assert "(end: max_steps 30 reached; its stop record in " in said, said
    assert ENDED in said, said
    assert "resume_from_checkpoint" not in said and "runs there again" not in said, said


def test_a_close_whose_messages_were_not_delivered_says_how_many_steps_were_taken(
    external: Path,
) -> None:
    """The steps the record's receiver held (its ``unfinished``: step 0) beside those the
    client sent it (steps 0 and 1), as the receipt's refusal says them (a user trial,
    htrial6: a trainer that ended at max_steps while 75 of a solver's 100 steps were
    queued was said to have stopped, without what it had taken). Failed before: no
    counts when the messages were not delivered."""
    said = close_after(external, StopReason("end", "max_steps 30 reached"))
    assert (
        "its stop record in " in said
        and "; it had taken 1 of the 2 time steps this simulation sent it). " in said
    ), said


def test_a_close_to_a_run_that_failed_keeps_the_resume_advice(external: Path) -> None:
    said = close_after(external, StopReason("error", "CUDA out of memory"))
    assert "(error: CUDA out of memory; its stop record in " in said, said
    assert "--resume_from_checkpoint latest" in said and ENDED not in said, said


def test_a_receipt_of_a_run_that_ended_says_it_ended_without_resume_advice(
    external: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receipt's path (`StopRecords.decide`): the receiver took the HELLO and step
    0 and stopped, its record lacking this BYE (tests/client/test_close_stop_record.py)."""
    full = FIFOBuffer(1)
    with running(buffer=full, rendezvous_dir=external, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("end", "max_steps 30 reached"))
        stop_before_the_first_question(monkeypatch, receiver, lambda r: r.backpressured())
        tuning = ClientTuning(disconnected_timeout=600.0, follow_timeout=1.0)
        client = Client(simulation_id=4, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(3):
            client.send(t, u=np.zeros(4))
        with pytest.raises(TimeoutError) as caught:
            client.close()
    said = str(caught.value)
    assert "stopped before it read it (end: max_steps 30 reached" in said, said
    assert ENDED in said, said
    assert "resume_from_checkpoint" not in said and "runs there again" not in said, said


def test_steps_held_outside_those_sent_are_not_said_taken_of_them() -> None:
    """A rerun by hand (steps 10 to 14) of a simulation whose earlier run had delivered
    steps 0 to 9 (the record's row: 10 held, first 0, last 9), its messages undelivered at
    a run's end: the close does not say "it had taken 5 of the 5 time steps" (none of
    these was taken), as a receipt's refusal does not (`taken_of`, one rule for both).
    Failed before (hfix2's rule met htrial6's counts in the merge): "taken 5 of the 5"."""
    from types import SimpleNamespace

    from melissa_trainer.client.closing import stop_first
    from melissa_trainer.client.gave_up import StopSaid
    from melissa_trainer.stream.step_set import StepSet

    sent = StepSet()
    for step in range(10, 15):
        sent.add(step)
    t = SimpleNamespace(endpoints=["tcp://a:1"], steps=[sent], simulation_id=3, rank=0)
    reason = "end: max_steps 20 reached; its stop record in DIR"

    def said(held: int, span: tuple[int, int] | None) -> str:
        stop = StopSaid("tcp://a:1", "ended", reason, "ENDED", TrainerStopped, held, span)
        return stop_first(t, "queued messages", True, stop)  # type: ignore[arg-type]

    assert "it had taken" not in said(10, (0, 9)), said(10, (0, 9))
    assert "it had taken" not in said(5, (0, 4)), said(5, (0, 4))
    assert "; it had taken 5 of the 5 time steps this simulation sent it" in said(5, (10, 14))
    assert "; it had taken 2 of the 5 time steps" in said(2, (10, 11))
    assert "; it had taken 0 of the 5 time steps" in said(0, (0, 0))  # (none held)
    assert "; it had taken 5 of the 5 time steps" in said(10, None)  # (an older row: as before)
