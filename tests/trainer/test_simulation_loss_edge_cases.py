"""Per-simulation losses (`melissa_trainer.core.loss_per_simulation`) at their edges: non-finite
and negative losses, one simulation per reduction period, a trainer that overrides
`compute_sample_losses` alone, a `process_batch` that drops samples. Each was a defect
found by trying the adaptive study as a user would; each test failed on the code it was
written against (fc9276e) and passes with the fix it names:

* A diverged (NaN) or negative-loss period is reported to the sampler as "average"
  (relative 1.0 for every simulation), instead of non-finite (skipped by
  `Launcher.observe`) or ordered by the loss.
* With one simulation per reduction period (FIFO, `job_limit=1`, or simulations longer
  than a period), every relative loss is exactly 1.0: the sampler is never steered.
* A trainer that overrides `compute_sample_losses` alone trains on another loss when
  the losses are tracked (an adaptive sampler) than when they are not.
* A `process_batch` that drops samples is reported as a `compute_sample_losses` error.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_simulation_loss import make_trainer

from melissa_trainer import Hook, OnlineTrainer, SampleBlock, SimulationLosses

CPU = torch.device("cpu")
W = np.array([1.0, -2.0, 0.5], np.float32)


def sequential(simulations: int, steps: int) -> Iterator[dict[str, np.ndarray]]:
    """Each simulation's `steps` samples in a row (as a FIFO buffer gives them when one
    simulation runs at a time); simulation s is y = x . W + 10 s: the larger s, the
    worse a model that has not learnt it (the same x for every simulation)."""
    for sid in range(simulations):
        rng = np.random.default_rng(0)
        for _ in range(steps):
            x = rng.standard_normal(3).astype(np.float32)
            y = np.array([x @ W + 10.0 * sid], np.float32)
            yield {"x": x, "y": y, "simulation_id": np.array(sid, np.int64)}


def test_a_diverged_simulation_is_not_observed_as_average() -> None:
    # Launcher.observe skips non-finite losses ("a diverged simulation steers nothing"),
    # but the NaN makes the period's mean NaN, `period_mean > 0` is False, and every
    # simulation of the period gets relative 1.0: the sampler is told all is average
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.tensor([float("nan"), 1.0]))
    updated = losses.reduce(step=1)
    assert not math.isfinite(updated[1].relative), updated[1]


def test_a_model_gone_nan_reports_no_finite_relative_loss() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2, 3]), torch.full((3,), float("nan")))
    relative = {sid: x.relative for sid, x in losses.reduce(step=1).items()}
    assert not any(math.isfinite(r) for r in relative.values()), relative


def test_negative_losses_keep_the_worse_simulation_above() -> None:
    # a loss below zero (a log-likelihood, a log of the error): the period's mean is
    # negative, and every relative loss is 1.0 (dividing by it would invert the order)
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.tensor([-2.0, -1.0]))  # 2 is the worse
    updated = losses.reduce(step=1)
    assert updated[2].relative > updated[1].relative, updated


@pytest.mark.timeout(60)
def test_one_simulation_per_period_still_orders_the_simulations(tmp_path: Path) -> None:
    # 12 samples per simulation, in a row; a period is 3 steps of 4 samples: one
    # simulation. lr 0: the model never changes, so the mean losses are comparable and
    # a statistic that "does not drift" must order the simulations as they do; the
    # relative loss divides each simulation by itself and reports 1.0 for all of them
    trainer = make_trainer(tmp_path, sequential(4, 12), lr=0.0)
    trainer.train()
    stats = list(trainer.simulation_losses.values())
    assert [x.draws for x in stats] == [12] * 4
    means = [x.mean for x in stats]
    assert means == sorted(means) and len(set(means)) == 4  # the data is as intended
    relative = [x.relative for x in stats]
    assert relative == sorted(relative) and len(set(relative)) == 4, relative


class FirstLoss(Hook):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_after_backward(self, trainer: Any, state: Any, control: Any, loss: Any) -> None:
        self.losses.append(float(loss))


@pytest.mark.timeout(60)
def test_overriding_compute_sample_losses_alone_trains_on_one_loss(tmp_path: Path) -> None:
    # the documented way in is compute_loss, then compute_sample_losses; overriding the
    # latter alone is accepted (the other way round is refused), and the run then trains
    # on L1 with an adaptive sampler but on the default MSE (and validates on it) without
    class L1Samples(OnlineTrainer):
        def compute_sample_losses(self, model: Any, batch: Any) -> torch.Tensor:
            return (model(batch[0]) - batch[1]).abs().mean(dim=1)

    first: list[float] = []
    for name, steps in (("tracked", 3), ("untracked", 0)):
        trainer = make_trainer(
            tmp_path / name, sequential(1, 4), cls=L1Samples, simulation_loss_steps=steps
        )
        hook = FirstLoss()
        trainer.hooks.add(hook)
        trainer.train()
        first.append(hook.losses[0])
    assert first[0] == pytest.approx(first[1]), first


@pytest.mark.timeout(60)
def test_a_process_batch_that_drops_samples_is_named(tmp_path: Path) -> None:
    def drop_last(block: SampleBlock) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = block.fields["x"][:-1], block.fields["y"][:-1]
        return torch.from_numpy(x.copy()), torch.from_numpy(y.copy())

    trainer = make_trainer(tmp_path, sequential(1, 8), process_batch=drop_last)
    with pytest.raises(ValueError, match="process_batch"):
        trainer.train()
