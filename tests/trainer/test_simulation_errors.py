"""The validation's per-simulation tails (`trainer.simulation_errors`, issue 46): the p99
and max of the held-out simulations' mean losses beside ``eval_loss``, checked against
the model's own errors computed here; none without simulation ids, or (with a warning)
when the trainer cannot compute one loss per sample. Two ranks: tests/trainer/
test_distributed.py (the sums reduced over ranks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(60)

#: held-out samples per simulation: unequal, so that the mean over samples differs from
#: the mean of the simulations' means
SIZES = (1, 2, 3, 5, 8)


def held_out() -> list[dict[str, Any]]:
    """Samples of `SIZES` simulations (ids 10, 20, ...), the targets of simulation 50
    shifted so that it is clearly the worst."""
    samples, stream = [], linear_samples(sum(SIZES), seed=3)
    for k, size in enumerate(SIZES):
        for _ in range(size):
            sample = next(stream)
            if k == len(SIZES) - 1:
                sample["y"] = sample["y"] + np.float32(30.0)
            samples.append({**sample, "simulation_id": np.array(10 * (k + 1), np.int64)})
    return samples


def trained(
    tmp_path: Path,
    validation: list[dict[str, Any]],
    cls=OnlineTrainer,
    metric_for_best: tuple[str, int] | None = None,
    **kw: Any,
):
    """A trainer of 24 samples validated on `validation`; `metric_for_best`: the
    metric_for_best_model and early_stopping_patience."""
    name, patience = metric_for_best or ("eval_loss", None)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo",
                             buffer_size=32, logging_steps=100, eval_steps=3,
                             save_at_end=False, report_to="none",
                             disable_progress_bar=True, metric_for_best_model=name,
                             early_stopping_patience=patience)  # fmt: skip
    model = small_model()
    trainer = cls(model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
                  train_source=list(linear_samples(24)), process_sample=xy,
                  eval_dataset=validation, **kw)  # fmt: skip
    trainer.train()
    return trainer


def oracle(model: torch.nn.Module, samples: list[dict[str, Any]]) -> dict[int, list[float]]:
    """Each simulation's per-sample squared errors, by the model itself."""
    errors: dict[int, list[float]] = {}
    with torch.no_grad():
        for sample in samples:
            x, y = xy(sample)
            errors.setdefault(int(sample["simulation_id"]), []).append(
                float(((model(x[None]) - y[None]) ** 2).mean())
            )
    return errors


def test_tails_are_the_held_out_simulations_p99_and_max(tmp_path: Path) -> None:
    validation = held_out()
    trainer = trained(tmp_path, validation)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert len(evals) == 2  # steps 3 and 6 (the end)
    last = evals[-1]
    errors = oracle(trainer.model, validation)
    means = [float(np.mean(e)) for e in errors.values()]
    assert last["eval_simulations"] == len(SIZES)
    assert last["eval_loss_max"] == pytest.approx(max(means), rel=1e-5)
    assert last["eval_loss_max"] == pytest.approx(float(np.mean(errors[50])), rel=1e-5)
    assert last["eval_loss_p99"] == pytest.approx(float(np.percentile(means, 99)), rel=1e-5)
    # eval_loss is still the mean over samples (not over simulations)
    everything = [v for e in errors.values() for v in e]
    assert last["eval_loss"] == pytest.approx(float(np.mean(everything)), rel=1e-5)
    assert float(np.mean(means)) != pytest.approx(last["eval_loss"], rel=1e-3)


def test_no_tails_without_simulation_ids(tmp_path: Path) -> None:
    validation = [{k: v for k, v in s.items() if k != "simulation_id"} for s in held_out()]
    trainer = trained(tmp_path, validation)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert evals and not any("eval_loss_max" in h for h in evals)


class OwnLoss(OnlineTrainer):
    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        return ((model(inputs) - targets) ** 2).mean()


def test_no_tails_and_a_warning_when_the_loss_cannot_be_split(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="overrides compute_loss but not compute_sample"):
        trainer = trained(tmp_path / "a", held_out(), cls=OwnLoss)
    assert not any("eval_loss_max" in h for h in trainer.state.log_history)

    def summed(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return ((outputs - targets) ** 2).mean()

    with pytest.warns(UserWarning, match="loss_fn takes no reduction"):
        trainer = trained(tmp_path / "b", held_out(), loss_fn=summed)
    assert not any("eval_loss_max" in h for h in trainer.state.log_history)


class OneLoss(OnlineTrainer):
    def compute_sample_losses(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        inputs, targets = batch
        return ((model(inputs) - targets) ** 2).mean().reshape(1)  # not one per sample


def test_per_sample_losses_of_the_wrong_shape_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one loss per sample is needed"):
        trained(tmp_path, held_out(), cls=OneLoss)


def test_the_best_model_is_chosen_on_a_tail_named_as_transformers_names_it(
    tmp_path: Path,
) -> None:
    """``loss_max`` is read as ``eval_loss_max`` (transformers' Trainer prefixes
    ``eval_``); before, it raised KeyError at the first validation, mid-run."""
    trainer = trained(tmp_path, held_out(), metric_for_best=("loss_max", 2))
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert trainer.state.best_metric == min(h["eval_loss_max"] for h in evals)


@pytest.mark.parametrize(
    ("name", "validation", "words"),
    [
        ("eval_loss_p95", held_out, "is not a metric the validation returns: eval_loss, "
         "eval_loss_p99, eval_loss_max, eval_simulations; set it"),
        ("eval_loss_max", lambda: list(linear_samples(4)), "returns: eval_loss (the tails "
         "need a simulation_id in every validation sample)"),
    ],
)  # fmt: skip
def test_a_metric_no_validation_returns_is_refused_when_the_trainer_is_built(
    tmp_path: Path, name: str, validation: Any, words: str
) -> None:
    """Before, the run trained (and a study ran its simulations) until its first
    validation, then stopped with a KeyError."""
    with pytest.raises(ValueError, match="metric_for_best_model") as info:
        trained(tmp_path, validation(), metric_for_best=(name, 2))
    assert words in str(info.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
