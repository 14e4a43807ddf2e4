"""A save at the end that fails under ``on_save_error="continue"`` (user trial 33, no
root needed: the trainer's file writes fail with ENOSPC, injected).

``continue`` trains on past a failed periodic save; at the end nothing is left to
train on: the failure is said as the end's (training has ended, the newest checkpoint
on disk, the steps that are not saved, the fix) and `train()` raises
`FinalCheckpointSaveError`, a `CheckpointSaveError` (a non-zero exit), where it said
"Training goes on without this checkpoint" and returned (exit 0). A preemption's
failed save is said as the end's too, and `Preempted` (exit 143) names the step a
resume starts from."""

from __future__ import annotations

import errno
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import (
    CheckpointSaveError,
    Hook,
    OnlineTrainer,
    Preempted,
    TrainingArguments,
)
from melissa_trainer.checkpoint import registry
from melissa_trainer.checkpoint.errors import FinalCheckpointSaveError
from melissa_trainer.common.checkpoint_names import list_checkpoints
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState

pytestmark = pytest.mark.timeout(120)


def full_disk_from(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Every checkpoint write from `step` on fails as on a full disk."""
    write = registry.write

    def failing(trainer: Any, staging: Path) -> None:
        if trainer.state.global_step >= step:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write(trainer, staging)

    monkeypatch.setattr(registry, "write", failing)


def make_trainer(out: Path, hooks: list[Hook] = (), **overrides: Any) -> OnlineTrainer:  # type: ignore[assignment]
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    options: dict[str, Any] = dict(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, logging_steps=1000, report_to="none", disable_progress_bar=True,
        on_save_error="continue", save_steps=2, save_seconds=None, max_steps=6,
    )  # fmt: skip
    model = small_model()
    return OnlineTrainer(
        model,
        TrainingArguments(**{**options, **overrides}),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(400)),
        process_sample=xy,
        hooks=list(hooks),
    )


def test_a_failed_final_save_under_continue_raises_and_says_what_is_not_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "out" / "checkpoints"
    full_disk_from(monkeypatch, 3)  # checkpoint-2 written; 4 fails (training goes on); 6 too
    trainer = make_trainer(tmp_path / "out")
    with caplog.at_level(logging.INFO), pytest.raises(FinalCheckpointSaveError) as info:
        trainer.train()
    assert isinstance(info.value, CheckpointSaveError)  # (`except CheckpointSaveError` holds)
    assert (info.value.step, info.value.saved_step) == (6, 2)
    said = str(info.value)
    assert said.startswith(f"could not save checkpoint {root / 'checkpoint-6'}: ")
    assert "No space left on device" in said
    assert "Training goes on" not in said
    assert "Training has ended at step 6 and its final checkpoint could not be written" in said
    assert f"the newest checkpoint on disk is {root / 'checkpoint-2'} (step 2)" in said
    assert "steps 3..6 are not saved" in said
    assert "make room and resume with resume_from_checkpoint='latest'" in said
    # the periodic save that failed during training: training went on, as asked
    during = [r.getMessage() for r in caplog.records if "checkpoint-4: " in r.getMessage()]
    assert during and "Training goes on without this checkpoint" in during[0]
    assert trainer.state.global_step == 6
    assert [p.name for p in list_checkpoints(root)] == ["checkpoint-2"]


class SignalAt(Hook):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_failed_preemption_save_under_continue_is_said_as_the_end_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    full_disk_from(monkeypatch, 3)
    trainer = make_trainer(tmp_path / "out", [SignalAt(3)], max_steps=20)
    with caplog.at_level(logging.INFO), pytest.raises(Preempted) as info:
        trainer.train()
    step = info.value.step
    assert info.value.code == 143 and info.value.resume_from == 2
    failed = [r.getMessage() for r in caplog.records if f"checkpoint-{step}: " in r.getMessage()]
    assert failed, [r.getMessage() for r in caplog.records]
    assert "Training goes on" not in failed[-1], failed  # (the step's periodic save's may)
    assert f"Training stopped for the preemption at step {step}" in failed[-1]
    assert f"steps 3..{step} are not saved" in failed[-1]
