"""Which held-out simulation is worst, and its parameters (`trainer.held_out`): the
validation's ``eval_worst_simulation``, ``trainer.held_out_losses`` and
``{output_dir}/held_out_losses.csv``, checked on a held-out set whose worst simulation
is planted (its targets shifted far off: whatever the model learnt, it errs most there)
and against the model's own per-simulation errors computed here."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, TrainingArguments

pytestmark = pytest.mark.timeout(60)

#: the planted worst simulation (not the largest id, nor the first)
WORST = 1_000_002
IDS = (1_000_000, 1_000_001, WORST, 1_000_003, 1_000_004)


def held_out(parameters: bool = True) -> list[dict[str, Any]]:
    """3 samples of each of `IDS`; each simulation's parameters (a, b) = (id - 10**6,
    10 * that); the targets of `WORST` shifted by 50."""
    samples, stream = [], linear_samples(3 * len(IDS), seed=5)
    for sid in IDS:
        for _ in range(3):
            sample = {**next(stream), "simulation_id": np.array(sid, np.int64)}
            if sid == WORST:
                sample["y"] = sample["y"] + np.float32(50.0)
            if parameters:
                k = sid - 1_000_000
                sample["parameters"] = np.array([k, 10.0 * k], np.float64)
            samples.append(sample)
    return samples


def trained(tmp_path: Path, validation: list[dict[str, Any]], source: Any = None):
    args = TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo",
                             buffer_size=32, logging_steps=100, eval_steps=3,
                             save_at_end=False, report_to="none",
                             disable_progress_bar=True)  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
                            train_source=source or list(linear_samples(24)),
                            process_sample=xy, eval_dataset=validation)  # fmt: skip
    return trainer


def own_means(model: torch.nn.Module, samples: list[dict[str, Any]]) -> dict[int, float]:
    """Each simulation's mean squared error, by the model itself."""
    errors: dict[int, list[float]] = {}
    with torch.no_grad():
        for sample in samples:
            x, y = xy(sample)
            loss = float(((model(x[None]) - y[None]) ** 2).mean())
            errors.setdefault(int(sample["simulation_id"]), []).append(loss)
    return {sid: float(np.mean(e)) for sid, e in errors.items()}


def test_the_planted_worst_simulation_is_named_with_its_parameters(tmp_path: Path) -> None:
    validation = held_out()
    trainer = trained(tmp_path, validation)
    trainer.train()
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    assert len(evals) == 2 and all(h["eval_worst_simulation"] == WORST for h in evals)
    means = own_means(trainer.model, validation)
    held = trainer.held_out_losses
    assert held is not None and held.step == trainer.state.global_step
    sid, loss, parameters = held.worst
    assert (sid, parameters) == (WORST, {"parameter_0": 2.0, "parameter_1": 20.0})
    assert loss == pytest.approx(means[WORST], rel=1e-5) == evals[-1]["eval_loss_max"]
    assert held.ids == IDS
    assert held.losses == pytest.approx([means[i] for i in IDS], rel=1e-5)
    with (tmp_path / "out" / "held_out_losses.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "simulation_id", "loss", "parameter_0", "parameter_1"]
    # worst first, every simulation once, each with its own parameters and loss
    assert [int(r["simulation_id"]) for r in rows] == sorted(IDS, key=lambda i: -means[i])
    for r in rows:
        k = int(r["simulation_id"]) - 1_000_000
        assert (float(r["parameter_0"]), float(r["parameter_1"])) == (k, 10.0 * k)
        assert float(r["loss"]) == pytest.approx(means[int(r["simulation_id"])], rel=1e-5)
        assert int(r["step"]) == trainer.state.global_step
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_the_stream_s_parameter_names_head_the_columns(tmp_path: Path) -> None:
    """A stream that knows the parameters' names (a `Study` fills in its sampler's) names
    the columns; the trainer is only validated here (`evaluate`, no stream started)."""
    stream = StreamSource(ReceiverConfig(fields={"x": ((3,), "float32")}, parameters=["a", "b"]))
    trainer = trained(tmp_path, held_out(), source=stream)
    metrics = trainer.evaluate()
    assert metrics["eval_worst_simulation"] == WORST
    assert trainer.held_out_losses is not None
    assert trainer.held_out_losses.worst[2] == {"a": 2.0, "b": 20.0}
    header = (tmp_path / "out" / "held_out_losses.csv").read_text().splitlines()[0]
    assert header == "step,simulation_id,loss,a,b"


def test_without_parameters_the_worst_is_still_named(tmp_path: Path) -> None:
    trainer = trained(tmp_path, held_out(parameters=False))
    assert trainer.evaluate()["eval_worst_simulation"] == WORST
    assert trainer.held_out_losses is not None
    assert trainer.held_out_losses.worst[0] == WORST
    assert trainer.held_out_losses.worst[2] == {}
    header = (tmp_path / "out" / "held_out_losses.csv").read_text().splitlines()[0]
    assert header == "step,simulation_id,loss"


def test_no_file_and_no_worst_without_simulation_ids(tmp_path: Path) -> None:
    validation = [{k: v for k, v in s.items() if k != "simulation_id"} for s in held_out()]
    trainer = trained(tmp_path, validation)
    assert "eval_worst_simulation" not in trainer.evaluate()
    assert trainer.held_out_losses is None
    assert not (tmp_path / "out" / "held_out_losses.csv").exists()


def test_a_file_that_cannot_be_written_is_a_warning_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trainer = trained(tmp_path, held_out())
    (tmp_path / "out" / "held_out_losses.csv.tmp").mkdir(parents=True)  # in the way
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        trainer.train()
    assert trainer.held_out_losses is not None and trainer.held_out_losses.worst[0] == WORST
    said = [r.getMessage() for r in caplog.records if "held-out losses" in r.getMessage()]
    assert said and str(tmp_path / "out" / "held_out_losses.csv") in said[0], said
    assert "training goes on" in said[0]
