"""The divergence warning (`hooks.divergence.diverged`) sees a sharp jump of the training
loss in its last log or two, which the smoothed level (the median of the last 5 logs)
misses: a diverging optimisation often shows as the loss a hundred times higher at once.
Oracles independent of the rule: series that jump by construction (a seeded plateau,
its last logs multiplied by 100, or a loss near overflow), a real training whose
learning rate is raised tenfold for its last log window (its last loss hundreds of
times its level before: the oracle reads it), validations and learning rates as written
in the history. That the jump brings no false alarms back: the stationary series of
tests/hooks/test_divergence_false_alarms.py, and benchmarks/divergence_alarms.py's
figures (docs/concepts/buffers.md)."""

from __future__ import annotations

from pathlib import Path
from statistics import median

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.hooks.divergence import diverged

pytestmark = pytest.mark.timeout(120)

LOGS = 53
SEEDS = range(1000, 1050)


def history(
    losses: list[float], evals: list[float] | None = None, lrs: list[float] | None = None
) -> list[dict[str, float]]:
    """Training logs every 5 steps, each with its learning rate and a validation when
    given."""
    out: list[dict[str, float]] = []
    for i, loss in enumerate(losses):
        step = 5.0 * (i + 1)
        out.append({"step": step, "loss": loss, **({"learning_rate": lrs[i]} if lrs else {})})
        if evals is not None:
            out.append({"step": step, "eval_loss": evals[i]})
    return out


def plateau(seed: int, jump: float, last: int) -> list[float]:
    """A noisy plateau about 3e-3 (sd 0.5 in log), its `last` logs times `jump`."""
    rng = np.random.default_rng(seed)
    losses = [float(x) for x in 3e-3 * np.exp(0.5 * rng.standard_normal(LOGS))]
    losses[-last:] = [x * jump for x in losses[-last:]]
    return losses


@pytest.mark.parametrize("last", [1, 2])
def test_a_hundredfold_jump_of_the_last_logs_is_told_divergence(last: int) -> None:
    for seed in SEEDS:
        told = diverged(history(plateau(seed, 100.0, last)))
        assert told is not None and "the training loss jumped to" in told, seed
        assert f"its last {'log' if last == 1 else '2 logs'}" in told, told
        assert "Lower the learning rate" in told
        assert diverged(history(plateau(seed, 1.0, last))) is None, seed  # (the control)


def test_a_loss_near_overflow_in_the_last_log_is_told_divergence() -> None:
    losses = plateau(0, 1.0, 1)
    losses[-1] = 1e30
    told = diverged(history(losses))
    assert told is not None and "jumped to 1e+30" in told, told
    losses[-1] = float("inf")
    told = diverged(history(losses))
    assert told is not None and "jumped to inf" in told, told


def test_what_the_history_says_against_a_jump_silences_it() -> None:
    losses = plateau(0, 100.0, 1)
    # a validation at its best at the last log: the model was at its best meanwhile
    improving = [1.0 / (i + 1) for i in range(LOGS)]
    assert diverged(history(losses, improving)) is None
    before = [1.0 / (i + 1) if i < LOGS - 3 else 1.0 for i in range(LOGS)]
    assert diverged(history(losses, before)) is not None
    # a learning rate at rest since the logs before the jump: the weights barely moved
    resting = [1e-3 if i < LOGS - 10 else 1e-9 for i in range(LOGS)]
    assert diverged(history(losses, lrs=resting)) is None
    assert diverged(history(losses, lrs=[1e-3] * LOGS)) is not None


def test_a_short_history_or_a_loss_at_or_below_zero_has_no_jump_to_judge() -> None:
    # (fewer than 10 logs before the jump: the level's rule alone, half the logs)
    assert diverged(history([1e-3] * 9 + [1e-1])) is None
    assert diverged(history([1e-3] * 10 + [1e-1])) is not None
    assert diverged(history([1e-3] * 9 + [0.0] + [1e-1])) is None  # (no ratio to 0)


def train(tmp_path: Path, boost: float) -> list[dict[str, float]]:
    """A real small training (SGD at 0.05: it learns), a log every 5 steps to step 80,
    the learning rate multiplied by `boost` from step 75: the last log's window only."""
    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, batch_size=8, buffer="fifo", logging_steps=5, pseudo_epochs=2,
        max_steps=80,
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 if s < 75 else boost)
    trainer = OnlineTrainer(
        model, args, optimizer, lr_scheduler=scheduler,
        train_source=list(linear_samples(400)), process_sample=xy,
    )  # fmt: skip
    trainer.train()
    return trainer.state.log_history


def test_a_real_training_diverging_in_its_last_log_is_told_divergence(tmp_path: Path) -> None:
    logs = train(tmp_path / "high", 10.0)
    losses = [e["loss"] for e in logs if "loss" in e]
    assert losses[-1] > 100 * median(losses[-6:-1])  # (the oracle: it jumped, at the end)
    told = diverged(logs)
    assert told is not None and "the training loss jumped to" in told, told
    assert diverged(train(tmp_path / "same", 1.0)) is None
