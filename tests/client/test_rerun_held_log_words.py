"""What the trainer's log says when a rerun skips the steps its receivers held (a user
trial: a simulation run again after a resume asks each receiver which of its steps the
checkpoint holds, skips them, and counts them in its BYE; the receivers logged only
"simulation 4 finished (5 time steps)", nothing of the steps that never came). Now each
receiver logs, once per simulation at its finish and at INFO, how many steps the rerun
skipped there and how many it took new. Failed before the change (no such line).

Real sockets and in-process receivers: `test_held_rerun_skips`'s set-up (two ranks, run
A's checkpoint resumed by run B)."""

from __future__ import annotations

import logging

import pytest
from test_held_rerun_skips import STEPS, Resumed, attempt, resumed, send, wait_until

from melissa_trainer.stream.receiver import Receiver

__all__ = ["resumed"]  # (the fixture, imported)

pytestmark = pytest.mark.timeout(120)


def finished(receivers: list[Receiver]) -> None:
    """Once each receiver finished simulation 4 (a counter: no event to wait on), stop
    them: their ingesters joined, whatever they log of it is logged."""
    wait_until("the simulation's finish", lambda: all(r.completed() == [4] for r in receivers))
    for receiver in receivers:
        receiver.stop()  # (idempotent: the fixture stops them again)


def test_each_receiver_logs_once_what_the_rerun_skipped(
    resumed: Resumed, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = attempt(monkeypatch, 0, "run-a")
    send(first, [0, 1, 2, 3, 4, 5, 6, 8])  # (rank 1's checkpoint lacks 7 and 9)
    resumed.resume([5, 3])
    first.close(bye=False)  # killed before its BYE: the launcher runs it again
    with caplog.at_level(logging.INFO, "melissa_trainer.stream"):
        again = attempt(monkeypatch, 1, "run-b")
        send(again, list(range(STEPS)))
        again.close()
        finished(resumed.receivers)
    said = [r.getMessage() for r in caplog.records if "rerun skipped" in r.getMessage()]
    assert sorted(said) == [
        "simulation 4: its rerun skipped 3 time steps the receiver of rank 1 already "
        "held (from its checkpoint or an earlier run of it) and sent 2 new",
        "simulation 4: its rerun skipped 5 time steps the receiver of rank 0 already "
        "held (from its checkpoint or an earlier run of it) and sent 0 new",
    ], said
    levels = {r.levelno for r in caplog.records if "rerun skipped" in r.getMessage()}
    assert levels == {logging.INFO}


def test_a_first_attempt_logs_no_skip(
    resumed: Resumed, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, "melissa_trainer.stream"):
        first = attempt(monkeypatch, 0, "run-a")
        send(first, list(range(STEPS)))
        first.close()
        finished(resumed.receivers)
    assert not [r for r in caplog.records if "rerun skipped" in r.getMessage()]
