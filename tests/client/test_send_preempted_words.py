"""What a blocked send says of a trainer whose stop record says it was preempted (a user
trial: an external trainer SIGTERMed while a send was blocked on back-pressure). The
close already said "the trainer was preempted (MESSAGE ...)" in place of "died"
(tests/client/test_close_preempted_words.py); the blocked send's own error, once its
receiver stayed disconnected `disconnected_timeout` s, still said "the trainer died, or
its node", and, after the follow wait, "run this simulation again" rather than that no
resume came; the close after that failure warned "the trainer died, or its node" too.
Now they say what the close with a BYE says (`RestartCheck.preempted`). Failed before
the change.

Real sockets on 127.0.0.1; the receiver writes its stop record as a trainer's does."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from stopped_receiver import send_until_gone, sent_then_stopped

from melissa_trainer.client import ClientTuning
from melissa_trainer.client.send_errors import ReceiverGone, StoppedForGood
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}
PREEMPTED = StopReason("preempted", "stopped by SIGTERM")


def blocked_send_error(rendezvous: Path, tuning: ClientTuning) -> ReceiverGone:
    """Simulation 6 (external mode), its step 0 taken by a receiver that then stopped,
    preempted; the error of the send that then blocked and gave up."""
    client, _ = sent_then_stopped(FIELDS, 6, tuning, rendezvous=rendezvous, reason=PREEMPTED)
    error = send_until_gone(client, u=np.ones(COUNT, np.float32))
    assert not isinstance(error, StoppedForGood)  # (preempted: waited for)
    return error


def says_preempted(said: str) -> None:
    assert said.startswith("simulation 6 rank 0: could not send time step "), said
    assert "the trainer was preempted (stopped by SIGTERM; its stop record in " in said, said
    assert "died" not in said, said


def test_a_blocked_send_says_the_trainer_was_preempted(
    external: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No replay window: the send's `ReceiverGone` is raised as it is, not followed; the
    close after it (no BYE) warns of what it dropped in the same words."""
    tuning = ClientTuning(
        disconnected_timeout=0.6, sndhwm=1, failed_close_timeout=1.0, replay_bytes=0
    )
    with caplog.at_level(logging.WARNING, "melissa_trainer.client.client"):
        said = str(blocked_send_error(external, tuning))
    says_preempted(said)
    assert "MELISSA_TRAINER_SIMULATION_ID=6" in said, said  # (what to do)
    dropped = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(dropped) == 1, dropped
    assert "the trainer was preempted (stopped by SIGTERM" in dropped[0], dropped
    assert "died" not in dropped[0], dropped


def test_a_following_send_says_no_resume_came(external: Path) -> None:
    """A replay window (the default in external mode): the client waits `follow_timeout`
    for the trainer to be resumed; its error says that none came, and what to do, in the
    close's words (`follow_words.follow_gave_up`)."""
    tuning = ClientTuning(
        disconnected_timeout=0.6, follow_timeout=0.5, sndhwm=1, failed_close_timeout=1.0
    )
    said = str(blocked_send_error(external, tuning))
    says_preempted(said)
    assert "no resume came within ClientTuning.follow_timeout=0.5 s" in said, said
    assert "--resume_from_checkpoint latest" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=6" in said, said
