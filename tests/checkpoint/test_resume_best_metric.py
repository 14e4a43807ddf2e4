"""Resuming with another `metric_for_best_model` or `greater_is_better`.

The checkpoint's best (`best_metric`, `best_step`) and early stopping's count are of
the metric and direction it was written with. Before, a resume with another metric
kept them: the new metric (a score below 1) was compared with the old best (a loss of
about 8.7), never beat it, and every validation counted as one without improvement.
Now the best starts afresh at the resume, on every rank, with one warning; an unchanged
resume keeps it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples, xy
from tiny_resume import said, tiny_run

from melissa_trainer import Hook, OnlineTrainer
from melissa_trainer.checkpoint.resumed_best import restart_best
from melissa_trainer.core.state import TrainerState

pytestmark = pytest.mark.timeout(90)

WARNING = "not of this run's metric"


class Score(Hook):
    """A metric of its own, greater is better: 1 / (1 + the validation set's MSE)."""

    eval_keys = frozenset({"score"})

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        total = 0.0
        for sample in trainer.eval_dataset:
            x, y = xy(sample)
            total += float(((trainer.model(x.unsqueeze(0)).squeeze(0) - y) ** 2).sum())
        return {"score": 1.0 / (1.0 + total / len(trainer.eval_dataset))}


def run(out: Path, **overrides: Any) -> OnlineTrainer:
    extra = {"eval_dataset": list(linear_samples(12, 5)), "hooks": [Score()]}
    return tiny_run(out, trainer_kwargs=extra, eval_steps=5, **overrides)


def test_a_resume_with_another_metric_starts_the_best_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = run(tmp_path / "out", max_steps=10)
    assert first.state.best_step == 10 and first.state.best_metric is not None
    loss_best = first.state.best_metric
    assert loss_best > 1  # an eval_loss no score (below 1) can beat if greater is better
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        trainer = run(
            tmp_path / "out",
            max_steps=20,
            metric_for_best_model="score",
            greater_is_better=True,
            resume_from_checkpoint="latest",
        )
    state = trainer.state
    # the score improves as the loss falls: its best is this run's, not the old loss
    assert state.best_metric is not None and state.best_metric < 1
    assert state.best_step == 20 and state.validations_since_best == 0
    (message,) = said(caplog, WARNING)
    assert "metric_for_best_model 'eval_loss' -> 'score'" in message
    assert f"{loss_best:.6g} at step 10, is of eval_loss (lower is better)" in message


def test_a_resume_with_the_same_metric_keeps_the_best(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "out", max_steps=10)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        trainer = run(tmp_path / "out", max_steps=10, resume_from_checkpoint="latest")
    assert trainer.state.best_step == 10  # nothing trained: the checkpoint's best, kept
    assert not said(caplog, WARNING)


def test_restart_best_forgets_only_on_a_change() -> None:
    state = TrainerState(best_metric=0.5, best_step=4, validations_since_best=3)
    saved = {"metric_for_best_model": "eval_loss", "greater_is_better": False}
    assert not restart_best(Path("c"), saved, dict(saved), state, main=True)
    assert (state.best_metric, state.best_step, state.validations_since_best) == (0.5, 4, 3)
    assert not restart_best(Path("c"), {}, saved, state, main=True)  # an older checkpoint
    flipped = {**saved, "greater_is_better": True}
    assert restart_best(Path("c"), saved, flipped, state, main=False)
    assert (state.best_metric, state.best_step, state.validations_since_best) == (None, None, 0)
