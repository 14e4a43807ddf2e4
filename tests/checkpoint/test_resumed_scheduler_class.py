"""A learning-rate scheduler of another class on resume is refused before training,
naming both classes and the fix (torch's `load_state_dict` is ``__dict__.update``: an
``ExponentialLR`` given a ``StepLR``'s state would halve every step, neither schedule);
a checkpoint written before the class was recorded is compared by its settings' names,
and its class is not named; the documented way to train on under another class
(docs/resume.md, "Another scheduler on resume") works.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import small_model
from safetensors.torch import load_file, load_model
from small_run import copy_of, exponential_lr, on_linear_samples, small_trainer, step_lr

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.scheduler_class import SCHEDULER_FILE

pytestmark = pytest.mark.timeout(180)

L = torch.optim.lr_scheduler
Build = Callable[[torch.optim.Optimizer], Any]


#: the other class of these tests: ExponentialLR(gamma=0.9)
exponential = exponential_lr()


def trainer_for(
    out: Path, max_steps: int, resume: str | None, build: Build | None
) -> tuple[OnlineTrainer, Any]:
    """The small run (small_run.py), SGD at 1e-2 and `build`'s scheduler."""
    run = small_trainer(out, max_steps, resume, scheduler=build)
    return run.trainer, run.scheduler


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 20 steps under StepLR(step_size=7, gamma=0.5): checkpoint-10 and -20."""
    out = tmp_path_factory.mktemp("written") / "out"
    trainer_for(out, 20, None, step_lr())[0].train()
    return out


def test_the_class_is_recorded(written: Path) -> None:
    record = (written / "checkpoints" / "checkpoint-20" / SCHEDULER_FILE).read_text()
    assert '"torch.optim.lr_scheduler.StepLR"' in record


def test_another_class_is_refused_before_training(written: Path, tmp_path: Path) -> None:
    out = copy_of(written, tmp_path)
    trainer, scheduler = trainer_for(out, 30, "latest", exponential)
    with pytest.raises(ValueError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "checkpoint-20 was written with the scheduler StepLR" in message, message
    assert "this run built ExponentialLR" in message, message
    assert "Build a StepLR to resume" in message, message
    assert '"Another scheduler on resume"' in message, message
    assert scheduler.gamma == 0.9 and trainer.state.global_step == 0  # nothing loaded
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir()) == [
        "checkpoint-10",
        "checkpoint-20",
    ]


def unrecorded(written: Path, tmp_path: Path) -> Path:
    """checkpoint-20 as a version before the record wrote it (loaded by hand: unverified)."""
    out = copy_of(written, tmp_path)
    path = out / "checkpoints" / "checkpoint-20"
    (path / SCHEDULER_FILE).unlink()
    return path


def test_unrecorded_another_class_is_refused_by_its_settings_names(
    written: Path, tmp_path: Path
) -> None:
    path = unrecorded(written, tmp_path)
    trainer, scheduler = trainer_for(tmp_path / "new", 30, None, exponential)
    with pytest.raises(ValueError) as caught:
        trainer.load_checkpoint(path)
    message = str(caught.value)
    assert "settings your ExponentialLR has not (step_size)" in message, message
    assert "does not name it" in message, message
    assert "StepLR" not in message, message  # not known: not said
    assert scheduler.gamma == 0.9


def test_unrecorded_same_settings_names_load(written: Path, tmp_path: Path) -> None:
    path = unrecorded(written, tmp_path)
    trainer, scheduler = trainer_for(
        tmp_path / "new", 30, None, lambda o: L.StepLR(o, step_size=3, gamma=0.9)
    )
    trainer.load_checkpoint(path)  # (a setting changed: the warning of test_resumed_scheduler)
    assert (scheduler.step_size, scheduler.gamma, trainer.state.global_step) == (7, 0.5, 20)


def test_the_documented_way_to_train_on_under_another_class(written: Path, tmp_path: Path) -> None:
    """docs/resume.md's recipe: a new run from the checkpoint's model and optimizer."""
    path = written / "checkpoints" / "checkpoint-20"
    model = small_model(1)  # (not the checkpoint's weights: the load shows)
    load_model(model, str(path / "model.safetensors"))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    optimizer.load_state_dict(torch.load(path / "optimizer.bin", weights_only=True))
    lr = optimizer.param_groups[0]["lr"]
    assert lr == pytest.approx(1e-2 * 0.5**2)  # StepLR's, halved at steps 7 and 14
    scheduler = L.ExponentialLR(optimizer, gamma=0.9)  # (from the loaded lr)
    args = TrainingArguments(
        output_dir=str(tmp_path / "new"), batch_size=8, buffer="fifo", buffer_size=32,
        watermark=16, max_steps=10, report_to="none", disable_progress_bar=True, seed=11,
    )  # fmt: skip
    saved = load_file(str(path / "model.safetensors"))
    assert all(torch.equal(value, saved[key]) for key, value in model.state_dict().items())
    trainer = on_linear_samples(model, args, optimizer, scheduler)
    trainer.train()
    assert trainer.state.global_step == 10
    assert optimizer.param_groups[0]["lr"] == pytest.approx(lr * 0.9**10)
