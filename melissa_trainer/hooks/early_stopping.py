"""Early stopping on the run's best metric (`TrainerState.best_metric`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

logger = logging.getLogger(__name__)

#: Hugging Face ``EarlyStoppingCallback``'s keywords, each with what to write here
_HF_KEYWORDS = {
    "early_stopping_patience": "early_stopping_patience= is patience= here "
    "(EarlyStoppingHook(patience=N))",
    "early_stopping_threshold": "early_stopping_threshold= has no equivalent here: any "
    "strict improvement of metric_for_best_model resets the count "
    "(state.validations_since_best); drop it, or write a hook that keeps its own count",
}


class EarlyStoppingHook(Hook):
    """Stops training after `patience` validations in a row without a new best metric.

    The metric and its direction are the trainer's (`metric_for_best_model`,
    `greater_is_better`): the trainer records each validation in `TrainerState`
    (`best_metric`, `best_step`, `validations_since_best`) and this hook only reads
    `state.validations_since_best`, so it keeps no state of its own and its patience
    survives a resume with the trainer state. Validation metrics are reduced over ranks,
    so every rank takes the same decision; the stop takes effect at the next stop
    synchronisation.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Hugging Face EarlyStoppingCallback's keywords, ported as they are, would get
        # Python's bare "unexpected keyword argument": name what to write here instead
        hints = [_HF_KEYWORDS[key] for key in kwargs if key in _HF_KEYWORDS]
        if hints:
            raise TypeError(f"{cls.__name__}() got Hugging Face's keyword: {'; '.join(hints)}")
        return super().__new__(cls)

    def __init__(self, patience: int) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = patience

    def on_validation_end(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        if state.validations_since_best >= self.patience:
            best = state.best_metric
            than = "" if best is None else f" than {best:.4g} (step {state.best_step})"
            # the words the end of the run prints (`TrainerControl.stop_reason`)
            control.request_stop(
                f"early stopping: no better {trainer.args.metric_for_best_model}{than} in "
                f"{state.validations_since_best} validations (patience {self.patience})"
            )

    def load_state_dict(self, state: Any) -> None:
        # Checkpoints of earlier versions hold this hook's own best and count, which now
        # live in TrainerState: such a checkpoint resumes, its count starting afresh.
        if state and set(state) <= {"best", "bad_validations"}:
            logger.warning(
                "checkpoint of an earlier version: early stopping's count of validations "
                "without improvement (%s) restarts from 0",
                state.get("bad_validations"),
            )
            return
        super().load_state_dict(state)
