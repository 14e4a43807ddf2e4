"""Early stopping on a validation metric; its patience survives a resume."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from melissa_trainer.hooks.base import Hook
from melissa_trainer.state import TrainerControl, TrainerState

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer import OnlineTrainer


class EarlyStoppingHook(Hook):
    """Stops training after `patience` validations without improvement of `metric`.

    An improvement is a value better than the best so far by more than `threshold`
    (lower is better unless `greater_is_better`). Validation metrics are reduced over
    ranks, so every rank takes the same decision; the stop takes effect at the next
    stop synchronisation. The best value and the count of validations without
    improvement are saved with checkpoints.
    """

    def __init__(
        self,
        patience: int,
        metric: str = "eval_loss",
        greater_is_better: bool = False,
        threshold: float = 0.0,
    ) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = patience
        self.metric = metric
        self.greater_is_better = greater_is_better
        self.threshold = threshold
        self.best: float | None = None
        self.bad_validations = 0

    def on_validation_end(
        self,
        trainer: OnlineTrainer,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        if self.metric not in metrics:
            raise KeyError(
                f"early stopping watches {self.metric!r} but validation returned "
                f"{sorted(metrics)}: set metric_for_best_model to one of them"
            )
        value = metrics[self.metric]
        sign = 1.0 if self.greater_is_better else -1.0
        improved = math.isfinite(value) and (
            self.best is None or sign * (value - self.best) > self.threshold
        )
        if improved:
            self.best = value
            self.bad_validations = 0
        else:
            self.bad_validations += 1
            if self.bad_validations >= self.patience:
                control.should_stop = True

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "bad_validations": self.bad_validations}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = state["best"]
        self.bad_validations = int(state["bad_validations"])
