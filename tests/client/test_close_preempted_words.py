"""What a close says of a trainer whose stop record says it was preempted (a user trial,
htrial19 Xb: an external trainer SIGTERMed, not restarted). The close waits for it by
design (`stopped`: a resumed trainer is followed), but its notice said "the trainer died
or stopped, or its node" and its error "the trainer died, or its node", not what the
record says. Now both say that the trainer was preempted (the record's message), the
notice that the client waits up to follow_timeout for it to be resumed
(--resume_from_checkpoint latest), the error that no resume came within it and what to
do. Failed before the change.

Real sockets on 127.0.0.1; a receiver of run ``run-a`` that takes step 0 and stops, its
stop record written as a trainer's receiver writes it on SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from stopped_receiver import sent_then_stopped

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}


#: what a close says of a record's resumable code (the C client's words too:
#: tests/c/test_c_preempted_words.py)
OPENING = {
    "preempted": "the trainer was preempted",
    "broken": "the trainer stopped on a broken collective, a resume may follow",
}


def preempted_client(
    rendezvous: Path,
    tuning: ClientTuning,
    code: str = "preempted",
    message: str = "stopped by SIGTERM",
) -> Client:
    """Simulation 8 (external mode), its step 0 taken by a receiver that then stopped,
    preempted (or `code`, with `message`); once the client saw the disconnection."""
    reason = StopReason(code, message)
    client, _ = sent_then_stopped(FIELDS, 8, tuning, rendezvous=rendezvous, reason=reason)
    return client


@pytest.mark.parametrize("code", ["preempted", "broken"])
def test_a_close_says_the_trainer_was_preempted_and_waits_for_its_resume(
    external: Path, caplog: pytest.LogCaptureFixture, code: str
) -> None:
    """``broken`` (a collective broke with every peer alive, no signal: hstop) is waited
    for as ``preempted``, in its own words; failed before (no such code: the record
    was refused, and the close said "the trainer died")."""
    tuning = ClientTuning(disconnected_timeout=0.6, follow_timeout=0.5)
    client = preempted_client(external, tuning, code)
    with (
        caplog.at_level(logging.WARNING, "melissa_trainer.client.client"),
        pytest.raises(TimeoutError) as caught,
    ):
        client.close()
    assert not isinstance(caught.value, TrainerStopped)  # (waited for: a resume may come)
    notices = [r.getMessage() for r in caplog.records if "closing, " in r.getMessage()]
    assert len(notices) == 1, notices
    notice = notices[0]
    assert f"{OPENING[code]} (stopped by SIGTERM" in notice, notice
    assert "(ClientTuning.follow_timeout=0.5 s) for the trainer to be resumed" in notice, notice
    assert "--resume_from_checkpoint latest" in notice, notice
    assert "died" not in notice, notice
    said = str(caught.value)
    assert said.startswith("simulation 8 rank 0: "), said
    assert f"{OPENING[code]} (stopped by SIGTERM" in said, said
    assert "no resume came within ClientTuning.follow_timeout=0.5 s" in said, said
    assert "--resume_from_checkpoint latest" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=8" in said, said
    assert "died" not in said, said


def test_a_preempted_message_is_quoted_as_its_first_line_of_200_characters(
    external: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The record's message is quoted as the other reasons' are (`reason_line.said_line`):
    its first line, at most 200 characters (the C client the same characters:
    tests/c/test_c_preempted_words.py). Failed before: quoted whole, its second line and
    all its 301 characters in the notice and the error."""
    tuning = ClientTuning(disconnected_timeout=0.6, follow_timeout=0.5)
    client = preempted_client(external, tuning, message="x" + "€" * 300 + "\nthe next line")
    with (
        caplog.at_level(logging.WARNING, "melissa_trainer.client.client"),
        pytest.raises(TimeoutError) as caught,
    ):
        client.close()
    quoted = f"the trainer was preempted (x{'€' * 199}; its stop record in {external})"
    notices = [r.getMessage() for r in caplog.records if "closing, " in r.getMessage()]
    assert len(notices) == 1 and quoted in notices[0], notices
    assert quoted in str(caught.value), str(caught.value)
