"""On torchrun's last attempt (``--max_restarts`` spent: `launch_restarts.restarts_left`
0), every ``preempted`` record says that no restart follows
(`launch_restarts.NO_RESTART_FOLLOWS`): a graceful preemption's (a SIGTERM the handler
took, its checkpoint written: `ending.end_training`) and a raw `KeyboardInterrupt`'s
(`failing.failed`), as a forced exit's and a peer's loss's did already
(tests/trainer/test_forced_stop_cause.py, test_peer_start_fails.py). The resume such a
record promises is then a person's or a scheduler's requeue, never torchrun's, which
restarts nothing more; its solvers wait for it. With a restart left, and not under
torchrun, the record says what it said. Failed before (task hwords): neither record
said it on any attempt.

The oracle: what the trainer told its source (`Source.note_stop`, which a stream writes
in its receivers' stop record: tests/trainer/test_failure_stop_record.py reads it there).
The torchrun worker's variables are set as training starts (after the set-up: a
restart's check of its failed attempt reads them there).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer

from melissa_trainer import Hook, Preempted, TrainerControl, TrainerState
from melissa_trainer.stream.launch_restarts import NO_RESTART_FOLLOWS

ATTEMPTS = pytest.mark.parametrize(
    "count", [None, 0, 1], ids=["not torchrun", "restarts left", "no restart left"]
)


class Torchrun(Hook):
    """As training starts, this process becomes a torchrun worker's (``--max_restarts
    1``, `count` restarts so far; None: not torchrun); then, at step 2, `then`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int | None, then: str) -> None:
        self.monkeypatch, self.count, self.then = monkeypatch, count, then

    def on_train_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        for name in (
            "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_MAX_RESTARTS",
            "TORCHELASTIC_RESTART_COUNT",
        ):
            self.monkeypatch.delenv(name, raising=False)
        if self.count is not None:
            self.monkeypatch.setenv("TORCHELASTIC_RUN_ID", "t")
            self.monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "1")
            self.monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(self.count))

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == 2 and self.then == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)  # (the trainer's handler takes it)
        elif state.global_step == 2:
            raise KeyboardInterrupt  # (Ctrl-C that the trainer's handler did not take)


def told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int | None, then: str
) -> list[tuple[str, str]]:
    """What a trainer that stops at step 2 by `then` told its source (`note_stop`)."""
    hook = Torchrun(monkeypatch, count, then)
    trainer = make_trainer(tmp_path / "out", list(linear_samples(400)), [hook], save_at_end=False)
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(trainer.source, "note_stop", lambda code, why: said.append((code, why)))
    with pytest.raises(Preempted if then == "SIGTERM" else KeyboardInterrupt):
        trainer.train()
    return said


@pytest.mark.timeout(120)
@ATTEMPTS
def test_a_graceful_preemption_says_whether_a_restart_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int | None
) -> None:
    [(code, why)] = told(tmp_path, monkeypatch, count, "SIGTERM")
    assert code == "preempted" and why.startswith("stopped by SIGTERM"), why
    assert why.endswith(f"; {NO_RESTART_FOLLOWS}") == (count == 1), why


@pytest.mark.timeout(120)
@ATTEMPTS
def test_a_raw_keyboard_interrupt_says_whether_a_restart_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int | None
) -> None:
    [(code, why)] = told(tmp_path, monkeypatch, count, "KeyboardInterrupt")
    assert code == "preempted" and why.startswith("interrupted (KeyboardInterrupt)"), why
    assert why.endswith(f"; {NO_RESTART_FOLLOWS}") == (count == 1), why
