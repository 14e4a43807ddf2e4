"""The end-of-run data-limited diagnosis judges the run's own `metric_for_best_model`,
in its direction (trial 37: a run judged on its relative L2 error was told "validation
stopped improving (eval_loss ...)" while the metric it early-stopped and kept its best
on was still improving, and told nothing when that metric had stalled and
``eval_loss`` had not). Constructed histories; the end-to-end line from a trainer with
a hook's metric is the last test."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.reuse import data_limited

pytestmark = pytest.mark.timeout(120)

LIMITED = "limited by its data"


def state(eval_loss: list[float], rel_l2: list[float], losses: list[float]) -> TrainerState:
    """Training logs and validations (``eval_loss`` and ``eval_rel_l2``) every 20 steps;
    the stream ended."""
    history: list[dict[str, float]] = []
    for i, (loss, e, r) in enumerate(zip(losses, eval_loss, rel_l2, strict=True)):
        step = 20.0 * (i + 1)
        history.append({"step": step, "loss": loss, "buffer_put": 40.0 * (i + 1)})
        history.append({"step": step, "eval_loss": e, "eval_rel_l2": r})
    return TrainerState(global_step=20 * len(losses), log_history=history, stream_ended=True)


FALLING = [5.0, 1.0, 0.5, 0.3]  # (the training loss)
STALLED = [1.0, 1.1, 1.2, 1.3]  # (best first, none better in the 3 since)
IMPROVING = [1.3, 1.2, 1.1, 1.0]


def test_a_stalled_own_metric_is_told_by_its_name() -> None:
    told = data_limited(state(IMPROVING, STALLED, FALLING), "rel_l2", False)
    assert told is not None and LIMITED in told
    assert told.startswith("validation stopped improving at step 20 (eval_rel_l2 1, ")


def test_an_improving_own_metric_is_not_told_though_eval_loss_stalled() -> None:
    assert data_limited(state(STALLED, IMPROVING, FALLING), "eval_rel_l2", False) is None
    told = data_limited(state(STALLED, IMPROVING, FALLING))  # (judged on eval_loss)
    assert told is not None and "(eval_loss 1, " in told


def test_a_greater_is_better_metric_is_judged_upwards() -> None:
    # accuracy-like: its best (the largest) first, then lower
    told = data_limited(state(IMPROVING, [0.9, 0.8, 0.7, 0.6], FALLING), "rel_l2", True)
    assert told is not None and "(eval_rel_l2 0.9, none better in the 3" in told
    assert data_limited(state(STALLED, [0.6, 0.7, 0.8, 0.9], FALLING), "rel_l2", True) is None


class RelL2(Hook):
    """A validation metric (`eval_figures`): 1.0 at the first validation, then better
    at each one (the run's own measure keeps improving, whatever ``eval_loss`` does)."""

    eval_keys = frozenset({"rel_l2"})

    def __init__(self) -> None:
        self.calls = 0

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        self.calls += 1
        return {"rel_l2": 1.0 / self.calls}


def test_the_trainer_tells_by_its_metric_for_best_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Validation data unrelated to training (``eval_loss`` stalls: each pseudo-epoch
    fits the training samples harder), the hook's metric improving: no diagnosis
    under ``metric_for_best_model="rel_l2"``."""
    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, buffer="fifo", batch_size=8, pseudo_epochs=40,
        logging_steps=20, eval_steps=40, metric_for_best_model="rel_l2",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        trainer = OnlineTrainer(
            model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
            train_source=list(linear_samples(32, 0)), process_sample=xy,
            eval_dataset=[{**s, "y": -10 * s["y"]} for s in linear_samples(32, 1)],
            hooks=[RelL2()],
        )  # fmt: skip
        trainer.train()
    evals = [e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e]
    assert len(evals) >= 4 and min(evals) < evals[-1]  # (eval_loss did stall)
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "validation stopped improving" in m], said
