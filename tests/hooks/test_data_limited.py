"""The end-of-run diagnosis of a data-limited run (issue 44): validation stopped
improving while the training loss kept falling, so the advice is more simulations, not
more reuse. The oracle is the data: targets unrelated to the inputs (nothing to learn
that generalizes: a model can only memorize its samples) against a learnable linear
relation."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import linear_samples, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)


def noise_samples(n: int, seed: int) -> Iterator[dict[str, np.ndarray]]:
    """Inputs and targets drawn independently: nothing to learn but the samples."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        x = rng.standard_normal(3).astype(np.float32)
        yield {"x": x, "y": rng.standard_normal(1).astype(np.float32), "index": np.asarray(i)}


def run(tmp_path: Path, train: list, val: list) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, buffer="fifo", batch_size=8, pseudo_epochs=60,
        logging_steps=20, eval_steps=40,
    )  # fmt: skip
    OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=train, process_sample=xy, eval_dataset=val,
    ).train()  # fmt: skip


def diagnoses(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not more reuse" in r.getMessage()]


def test_a_run_that_memorizes_its_samples_is_told_more_simulations_not_more_reuse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(tmp_path, list(noise_samples(32, 0)), list(noise_samples(32, 1)))
    (told,) = diagnoses(caplog)
    assert told.startswith("validation stopped improving at step ")
    assert "more simulations (the launcher's n_simulations), not more reuse" in told


def test_a_run_whose_validation_keeps_improving_is_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(tmp_path, list(linear_samples(32, 0)), list(linear_samples(32, 1)))
    assert diagnoses(caplog) == []
