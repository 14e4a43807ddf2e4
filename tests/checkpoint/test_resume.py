"""Resuming from a checkpoint continues exactly like an uninterrupted run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import Recorder, linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.common.checkpoint_names import latest_checkpoint, list_checkpoints
from melissa_trainer.config.reading import ConfigError

pytestmark = pytest.mark.timeout(90)

N_SAMPLES = 400


def run(tmp_path: Path, buffer: str, **overrides: Any) -> tuple[OnlineTrainer, Recorder]:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer=buffer,
        buffer_size=32,
        watermark=16,
        logging_steps=5,
        report_to="none",
        disable_progress_bar=True,
        stop_sync_steps=4,
        **overrides,
    )
    rec = Recorder()
    model = small_model(0, dropout=0.2)  # dropout: the RNG state matters
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.5)
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        scheduler,
        train_source=lambda rank, world: linear_samples(N_SAMPLES, seed=3),
        process_sample=xy,
        hooks=[rec],
    )
    trainer.train()
    return trainer, rec


def test_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path: Path) -> None:
    # FIFO: the data order does not depend on how fast the producer thread runs.
    buffer, extra = "fifo", {}
    full, full_rec = run(tmp_path / "full", buffer, max_steps=30, save_at_end=False, **extra)

    first, first_rec = run(tmp_path / "split", buffer, max_steps=13, save_at_end=True, **extra)
    saved = latest_checkpoint(tmp_path / "split" / "out" / "checkpoints")
    assert saved is not None and saved.name == "checkpoint-13"

    second, second_rec = run(
        tmp_path / "split",
        buffer,
        max_steps=30,
        save_at_end=False,
        resume_from_checkpoint="latest",
        **extra,
    )
    assert second.state.global_step == 30
    assert first_rec.losses + second_rec.losses == full_rec.losses
    for a, b in zip(
        full.accelerator.unwrap_model(full.model).parameters(),
        second.accelerator.unwrap_model(second.model).parameters(),
        strict=True,
    ):
        assert torch.equal(a, b)
    assert second.state.samples_seen == full.state.samples_seen
    assert len(first_rec.losses) == 13
    # the samples between the last log (step 10) and the checkpoint (13) are counted
    assert second.state.total_samples_seen == full.state.total_samples_seen == 30 * 8


def test_resume_latest_without_a_checkpoint_says_it_starts_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="melissa_trainer"):
        trainer, _ = run(tmp_path, "fifo", max_steps=2, resume_from_checkpoint="latest")
    assert trainer.state.global_step == 2
    root = tmp_path / "out" / "checkpoints"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"resume_from_checkpoint='latest': no checkpoint under {root}, starting afresh"
    ]


def test_loaded_checkpoint_restores_state_buffer_optimizer_rng(tmp_path: Path) -> None:
    first, _ = run(tmp_path, "firo", max_steps=9, save_at_end=True)
    path = latest_checkpoint(Path(first.args.output_dir) / "checkpoints")
    assert path is not None
    rng_at_save = torch.load(path / "random_states_0.pkl", weights_only=False)["torch_manual_seed"]

    args = TrainingArguments(
        output_dir=str(tmp_path / "other"),
        batch_size=8,
        buffer="firo",
        buffer_size=32,
        watermark=16,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(1, dropout=0.2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.5)
    second = OnlineTrainer(model, args, optimizer, scheduler, train_source=[], process_sample=xy)
    second.load_checkpoint(path)

    assert second.state.global_step == first.state.global_step == 9
    assert second.state.samples_seen == first.state.samples_seen
    arrays_a, meta_a = first.buffer.state_dict()
    arrays_b, meta_b = second.buffer.state_dict()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    assert all(np.array_equal(arrays_a[k], arrays_b[k]) for k in arrays_a)
    opt_a, opt_b = first.optimizer.state_dict(), second.optimizer.state_dict()
    for key, st in opt_a["state"].items():
        assert torch.equal(st["exp_avg"], opt_b["state"][key]["exp_avg"])
    assert scheduler.last_epoch == 9
    assert torch.equal(torch.get_rng_state(), rng_at_save)


def test_resume_from_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    # a path that does not exist: refused with the arguments (test_arguments_paths.py)
    with pytest.raises(ConfigError, match="is not a directory: give 'latest'"):
        run(tmp_path, "fifo", max_steps=3, resume_from_checkpoint=str(tmp_path / "nope"))
    # a directory that is not a checkpoint: refused by train()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a checkpoint directory"):
        run(tmp_path, "fifo", max_steps=3, resume_from_checkpoint=str(tmp_path / "empty"))


def test_resuming_an_older_checkpoint_moves_the_later_ones_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user who resumes from a named older checkpoint starts another history: the
    later checkpoints (of the run not continued) are moved, unchanged, into a sibling
    folder, said in one warning, so that this run's saves do not replace them,
    max_to_keep does not delete this run's checkpoints in their favour, and `latest`
    takes this run's newest. Before, they stayed (with a warning): with max_to_keep 3
    the resumed run's checkpoint-6 went first, a later `latest` resumed checkpoint-12
    of the abandoned run (the user trials: trial 37, and one before)."""
    first, _ = run(tmp_path, "fifo", max_steps=12, save_steps=4, save_at_end=False)
    root = Path(first.args.output_dir) / "checkpoints"
    assert [p.name for p in list_checkpoints(root)] == [
        "checkpoint-4", "checkpoint-8", "checkpoint-12"
    ]  # fmt: skip
    weights = (root / "checkpoint-12" / "model.safetensors").read_bytes()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(tmp_path, "fifo", max_steps=10, save_steps=2, save_at_end=False,
            resume_from_checkpoint=str(root / "checkpoint-4"))  # fmt: skip
    said = [r.getMessage() for r in caplog.records if "moved to" in r.getMessage()]
    assert len(said) == 1 and "(checkpoint-8, checkpoint-12)" in said[0], said
    (aside,) = root.parent.glob("checkpoints-after-checkpoint-4-*")
    assert str(aside) in said[0]
    assert [p.name for p in list_checkpoints(aside)] == ["checkpoint-8", "checkpoint-12"]
    assert (aside / "checkpoint-12" / "model.safetensors").read_bytes() == weights
    # this run's own, the newest 3 (max_to_keep's default): none of the other run's
    assert [p.name for p in list_checkpoints(root)] == [
        "checkpoint-6", "checkpoint-8", "checkpoint-10"
    ]  # fmt: skip
    resumed, _ = run(tmp_path, "fifo", max_steps=12, save_at_end=False,
                     resume_from_checkpoint="latest")  # fmt: skip
    assert resumed.state.global_step == 12
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):  # the newest: no word
        run(tmp_path, "fifo", max_steps=14, save_at_end=False,
            resume_from_checkpoint=str(root / "checkpoint-10"))  # fmt: skip
    assert not [r for r in caplog.records if "moved to" in r.getMessage()]
