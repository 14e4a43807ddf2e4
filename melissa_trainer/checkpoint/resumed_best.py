"""What a resume does with the best metric when the metric or its direction changed.

The `TrainerState` of a checkpoint holds the run's best validation value
(`best_metric`, `best_step`) and the count of validations since (the patience of early
stopping, `validations_since_best`). They are values of the checkpoint's
`metric_for_best_model`, better in its `greater_is_better` direction. A resume with
another metric (``eval_loss`` -> ``eval_rel_l2``) or the other direction compared the
new run's validations with that best without a word: a loss of 8.7 as the accuracy to
beat, or the lowest loss as the largest to beat, so early stopping could stop a run
whose every validation improved. The best of another metric says nothing of this one:
the resume starts the best and the count afresh, on every rank (the state is global and
early stopping must decide alike), and the main rank says so in one warning naming the
setting, the discarded best and where it came from (`restart_best`). Hugging Face's
Trainer keeps its state's `best_metric` then, silently.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from melissa_trainer.core.state import TrainerState

__all__ = ["BEST_SETTINGS", "restart_best"]

logger = logging.getLogger(__name__)

#: the settings whose change makes the checkpoint's best another measure's
BEST_SETTINGS = ("metric_for_best_model", "greater_is_better")


def restart_best(
    path: Path,
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    state: TrainerState,
    main: bool,
) -> bool:
    """Forget `state`'s best (`best_metric`, `best_step`, `validations_since_best`), as
    loaded from checkpoint `path`, when `current` (this run's arguments) has another
    `BEST_SETTINGS` value than `saved` (the checkpoint's ``training_args.json``; a
    setting it lacks counts as unchanged); warn once when `main` and there was a best.
    Call it on every rank, after the state is loaded. Returns whether it was forgotten."""
    changed = [
        f"{name} {saved[name]!r} -> {current[name]!r}"
        for name in BEST_SETTINGS
        if name in saved and name in current and saved[name] != current[name]
    ]
    if not changed:
        return False
    best, step = state.best_metric, state.best_step
    state.best_metric, state.best_step, state.validations_since_best = None, None, 0
    if main and best is not None:
        metric = saved.get("metric_for_best_model", current.get("metric_for_best_model"))
        greater = saved.get("greater_is_better", current.get("greater_is_better"))
        logger.warning(
            "resuming from %s with %s: the checkpoint's best, %.6g at step %s, is of %s "
            "(%s is better), not of this run's metric: the best metric and early "
            "stopping's count of validations without improvement start afresh from this "
            "resume (resume with the checkpoint's settings to keep them)",
            path,
            ", ".join(changed),
            best,
            step,
            metric,
            "greater" if greater else "lower",
        )
    return True
