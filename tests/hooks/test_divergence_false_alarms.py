"""The end-of-run divergence warning (`hooks.divergence.diverged`) does not cry wolf.

A user trial (a StepLR scheduler down to ~4e-11, validation every 5 steps, batch 8, a
log every 5 steps) ended told "the training loss grew from 0.0003177 (step 65) to
0.003229 (step 264) ... Lower the learning rate" with its ``eval_loss`` at its best and
its learning rate at ~0: one noisy window against the lowest of 53. Oracles independent
of the rule: series stationary by construction (seeded, never diverging), series and a
real training that diverge by construction (the loss grows by orders over the last
logs), validations and learning rates as written in the history."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.divergence import diverged
from melissa_trainer.hooks.reuse import data_limited

pytestmark = pytest.mark.timeout(120)

STEPS = [5.0 * (i + 1) for i in range(52)] + [264.0]  # (53 logs, the last at the end)
SEEDS = range(1000, 1050)  # (not the seeds the rule's constants were chosen on)


def history(
    losses: list[float], evals: list[float] | None = None, lrs: list[float] | None = None
) -> list[dict[str, float]]:
    """Training logs at `STEPS` (or every 5 steps), each with its learning rate when
    given, and a validation at each when given."""
    steps = STEPS if len(losses) == len(STEPS) else [5.0 * (i + 1) for i in range(len(losses))]
    out: list[dict[str, float]] = []
    for i, (step, loss) in enumerate(zip(steps, losses, strict=True)):
        out.append({"step": step, "loss": loss, **({"learning_rate": lrs[i]} if lrs else {})})
        if evals is not None:
            out.append({"step": step, "eval_loss": evals[i]})
    return out


def step_lr() -> list[float]:
    """StepLR from 1e-3, gamma 0.1 every 30 steps: ~1e-11 at the end."""
    return [1e-3 * 0.1 ** (step // 30) for step in STEPS]


def trial() -> tuple[list[float], list[float]]:
    """The trial's figures: a noisy plateau about 2.7e-3 (each log the mean of 40
    samples), its lowest log 0.0003177 at step 65, its last 0.003229; validation
    falling to its best, 0.002705, at the last one."""
    rng = np.random.default_rng(7)
    losses = [float(x) for x in 2.7e-3 * np.exp(0.5 * rng.standard_normal(len(STEPS)))]
    losses[STEPS.index(65.0)], losses[-1] = 3.177e-4, 3.229e-3
    evals = [0.002705 * (1.0 + np.exp(-step / 60.0)) for step in STEPS]
    return losses, evals


def test_the_trial_run_is_not_told_its_optimisation_diverged() -> None:
    losses, evals = trial()
    state = TrainerState(
        global_step=264, log_history=history(losses, evals, step_lr()), stream_ended=True
    )
    told = data_limited(state)
    assert told is None or "diverging" not in told
    # the smoothed levels alone do not call it divergence: no validation, no rates
    assert diverged(history(losses)) is None


def rising(growth: float = 20.0) -> list[float]:
    """A plateau at 1e-3, then, over the last 10 logs, a level `growth` times higher
    (harder samples streaming in, or a diverging optimisation: the history decides)."""
    return [1e-3] * (len(STEPS) - 10) + [growth * 1e-3] * 10


def test_a_validation_at_its_best_after_the_rise_says_it_did_not_diverge() -> None:
    told = diverged(history(rising()))  # (the control: nothing says otherwise)
    assert told is not None and "20 times its lowest" in told
    improving = [1.0 / step for step in STEPS]  # (the best at the last log, after the rise)
    assert diverged(history(rising(), improving)) is None
    # a best validation before the rise says nothing about it
    before = [1.0 / step if step <= 200 else 1.0 for step in STEPS]
    assert diverged(history(rising(), before)) is not None


def test_a_learning_rate_at_rest_since_the_lowest_level_cannot_diverge() -> None:
    assert diverged(history(rising(), lrs=step_lr())) is None  # (1e-3 -> 1e-7 by step 120)
    constant = [1e-3] * len(STEPS)
    assert diverged(history(rising(), lrs=constant)) is not None
    # nor grow the validation
    evals = [1.0 / step for step in STEPS[:-1]] + [1.0]  # (its best at step 260)
    assert diverged(history([1e-3] * len(STEPS), evals, step_lr())) is None
    assert diverged(history([1e-3] * len(STEPS), evals, constant)) is not None


def stationary(seed: int, kind: str) -> list[float]:
    """53 logs of a run that does not diverge: a stationary plateau, each log (i) a
    log-normal level (sd 0.8 in log: a lowest log ~7 times below the median in 53) or
    (ii) the mean of 40 sample losses, most small, one in 40 a hundred times larger
    (a few hard samples: heavy-tailed windows)."""
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        return [float(x) for x in 3e-3 * np.exp(0.8 * rng.standard_normal(len(STEPS)))]
    out = []
    for _ in STEPS:
        sample = rng.exponential(1e-3, 40)
        hard = rng.random(40) < 1 / 40
        sample[hard] += rng.exponential(1e-1, int(hard.sum()))
        out.append(float(sample.mean()))
    return out


@pytest.mark.parametrize("kind", ["lognormal", "heavy_tailed"])
def test_noisy_stationary_runs_are_not_told_divergence(kind: str) -> None:
    # (the single-window rule warned about 17 and 7 of these 50)
    alarms = [s for s in SEEDS if diverged(history(stationary(s, kind))) is not None]
    assert alarms == []


def test_runs_whose_loss_grows_by_orders_are_told_divergence() -> None:
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        # a falling curve to a plateau at 3e-3, then 3 times more each log over the last 5
        level = [np.exp(-i / 4) + 3e-3 for i in range(48)] + [3e-3 * 3.0**i for i in range(1, 6)]
        noisy = [x * np.exp(0.5 * rng.standard_normal()) for x in level]
        told = diverged(history([float(x) for x in noisy]))
        assert told is not None and "the training loss grew from" in told, seed


def train(tmp_path: Path, boost: float) -> list[dict[str, float]]:
    """A real small training: SGD at 0.05 (it learns), the learning rate multiplied by
    `boost` from step 60 to the end at step 80 (6: it diverges, the loss growing about
    a thousandfold a log, still finite at the end)."""
    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, batch_size=8, buffer="fifo", logging_steps=5, pseudo_epochs=2,
        max_steps=80,
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 if s < 60 else boost)
    trainer = OnlineTrainer(
        model, args, optimizer, lr_scheduler=scheduler,
        train_source=list(linear_samples(400)), process_sample=xy,
    )  # fmt: skip
    trainer.train()
    return trainer.state.log_history


def test_a_real_training_with_a_too_high_learning_rate_is_told_divergence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        logs = train(tmp_path / "high", 6.0)
    losses = [e["loss"] for e in logs if "loss" in e]
    assert losses[-1] > 1e3 * min(losses)  # (the oracle: it diverged)
    told = [r.getMessage() for r in caplog.records if "diverging optimisation" in r.getMessage()]
    assert len(told) == 1 and "the training loss grew from" in told[0]
    assert "Lower the learning rate" in told[0]
    assert diverged(train(tmp_path / "same", 1.0)) is None
