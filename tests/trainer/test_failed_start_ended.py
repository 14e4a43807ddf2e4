"""`OnlineTrainer.train_ended` ("train() returned or raised") after a `train()` whose
source's start raised (`starting.start_training`): the trainer cannot train again
(`refuse_second_train`), so train() has ended, and a collective call after it must check
in (`after_train.meet_after_train` reads `train_ended`) and a hook fired then is not one
"during train()" (`actions`: a request never performed, a load refused). Before the fix
the flag stayed False there (it is set in train()'s ``finally``, past the start): under
several ranks a save after such a train() on rank 0 alone skipped the check-in, and
hooks fired by a later evaluate() had their calls kept as requests never performed.
A train() refused before its source started may be retried: the flag stays False there
(a hook's call in the retry is one during train())."""

from __future__ import annotations

from pathlib import Path

import pytest
from four_step import four_step_trainer

from melissa_trainer.trainer import starting

pytestmark = pytest.mark.timeout(60)


def test_a_train_whose_source_start_failed_has_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = four_step_trainer(tmp_path / "out")

    def fails(*args: object) -> None:
        raise OSError("the receivers' port is taken")

    monkeypatch.setattr(trainer.source, "start", fails)
    with pytest.raises(OSError, match="port is taken"):
        trainer.train()
    assert trainer.train_started and trainer.train_ended


def test_a_train_refused_before_the_start_has_not_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = four_step_trainer(tmp_path / "out")

    def refuses(trainer: object) -> None:
        raise ValueError("the schedule ends before max_steps")

    monkeypatch.setattr(starting, "check_schedule", refuses)
    with pytest.raises(ValueError, match="schedule ends"):
        trainer.train()
    assert not trainer.train_started and not trainer.train_ended
    monkeypatch.undo()  # (the retry: trains, then has ended)
    assert trainer.train().global_step == 4
    assert trainer.train_ended
