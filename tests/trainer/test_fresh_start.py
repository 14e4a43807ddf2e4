"""A run started afresh in an output_dir that holds an earlier run's checkpoints.

Before: it trained, wrote its checkpoints beside the earlier run's (one of a step both
wrote replaced the earlier one), and a later ``--resume_from_checkpoint latest`` took the
newest step of either run. Now: refused before anything starts, naming the three ways
on, or, with ``overwrite_output_dir``, the earlier checkpoints moved aside intact.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import ConfigError, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(300)


def samples(n: int, offset: int) -> Any:
    rng = np.random.default_rng(offset)
    for _ in range(n):
        x = rng.standard_normal(3).astype(np.float32)
        yield {"x": x, "y": x[:1].copy()}


class Recorded:
    """A source factory that says whether the trainer started its source (the refusal
    must come before: `IterableSource.start` calls the factory)."""

    def __init__(self) -> None:
        self.started = False

    def __call__(self, rank: int, world_size: int) -> Any:
        self.started = True
        return samples(100, 7)


def make(out: Path, source: Any = None, **overrides: Any) -> OnlineTrainer:
    from helpers import small_model, xy

    settings: dict[str, Any] = dict(
        output_dir=str(out), batch_size=4, buffer="fifo", buffer_size=64, watermark=4,
        report_to="none", disable_progress_bar=True, stop_sync_steps=2, save_steps=4,
        max_to_keep=10,
    )  # fmt: skip
    model = small_model(0)
    return OnlineTrainer(
        model,
        TrainingArguments(**{**settings, **overrides}),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=source if source is not None else (lambda r, w: samples(200, 1)),
        process_sample=xy,
    )


def tree(root: Path) -> dict[str, str]:
    """Every file under `root`, by relative path, with its SHA-256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_fresh_start_beside_an_earlier_runs_checkpoints_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    assert make(tmp_path, max_steps=10).train().global_step == 10
    root = tmp_path / "checkpoints"
    before = tree(root)
    assert [p.name for p in ckpt.list_checkpoints(root)] == [
        "checkpoint-4", "checkpoint-8", "checkpoint-10",
    ]  # fmt: skip
    source = Recorded()
    trainer = make(tmp_path, source=source, max_steps=6)
    with pytest.raises(ConfigError) as caught:
        trainer.train()
    message = str(caught.value)
    for names_a_way_on in ("--resume_from_checkpoint latest", "another output_dir",
                           "--overwrite_output_dir", "checkpoint-10",
                           # the keywords too: this script builds TrainingArguments itself
                           "resume_from_checkpoint='latest'", "overwrite_output_dir=True",
                           ):  # fmt: skip
        assert names_a_way_on in message
    assert not source.started  # nothing started
    # "false" said on the command line (read as no resume) is not called "not set"
    said_false = make(tmp_path, source=source, max_steps=6, resume_from_checkpoint="false")
    with pytest.raises(ConfigError) as caught:
        said_false.train()
    assert "is not set" not in str(caught.value)
    assert (
        "resume_from_checkpoint is unset or false (a run starts afresh only in an "
        "output_dir without checkpoints)" in " ".join(str(caught.value).split())
    )
    assert not source.started
    assert tree(root) == before  # nothing written, moved or deleted
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("checkpoints")) == [
        "checkpoints"
    ]
    # the ways on work: "latest" continues the earlier run (the refused trainer, still
    # referenced, let output_dir go: its train() released the lock when it raised)
    assert make(tmp_path, max_steps=12, resume_from_checkpoint="latest").train().global_step == 12


def test_overwrite_output_dir_moves_the_earlier_checkpoints_aside_intact(tmp_path: Path) -> None:
    make(tmp_path, max_steps=10).train()
    before = tree(tmp_path / "checkpoints")
    assert make(tmp_path, max_steps=6, overwrite_output_dir=True).train().global_step == 6
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("checkpoints-previous-")]
    assert len(aside) == 1 and tree(aside[0]) == before  # every file, byte for byte
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "checkpoints")] == [
        "checkpoint-4",
        "checkpoint-6",
    ]  # fmt: skip: this run's only
    # "latest" now means this run's newest (6), not the earlier run's 10
    resumed = make(tmp_path, max_steps=8, resume_from_checkpoint="latest")
    assert resumed.train().global_step == 8
    assert resumed.state.samples_seen == 8 * 4


def scalar_steps(logdir: Path, tag: str = "train/loss") -> list[int]:
    """The steps of `tag` in the event files of `logdir`, read back with TensorBoard's
    reader (what TensorBoard would draw as one curve)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def test_overwrite_output_dir_moves_the_earlier_tensorboard_folder_aside_too(
    tmp_path: Path,
) -> None:
    """Else TensorBoard draws both runs as one curve: the new run's first steps after the
    earlier run's last (a user's report). A logging_dir of the user's is left alone."""
    tb = {"report_to": "tensorboard", "logging_steps": 2}
    make(tmp_path, max_steps=10, **tb).train()
    earlier = tree(tmp_path / "runs")
    assert scalar_steps(tmp_path / "runs") == [2, 4, 6, 8, 10]
    make(tmp_path, max_steps=6, overwrite_output_dir=True, **tb).train()
    assert scalar_steps(tmp_path / "runs") == [2, 4, 6]  # this run's only
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("runs-previous-")]
    assert tree(aside) == earlier  # every file, byte for byte
    stamp = aside.name.removeprefix("runs-previous-")
    assert (tmp_path / f"checkpoints-previous-{stamp}").is_dir()  # one stamp for both
    # a logging_dir given by the user: neither moved nor emptied
    mine = tmp_path / "my_tensorboard"
    make(tmp_path, max_steps=4, overwrite_output_dir=True, logging_dir=str(mine), **tb).train()
    mine_before = tree(mine)
    make(tmp_path, max_steps=4, overwrite_output_dir=True, logging_dir=str(mine), **tb).train()
    assert tree(mine).items() >= mine_before.items() and len(scalar_steps(mine)) == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("my_tensorboard-previous")]


def test_a_trainer_that_loaded_a_checkpoint_by_hand_continues_it(tmp_path: Path) -> None:
    make(tmp_path, max_steps=5).train()
    loaded = make(tmp_path, max_steps=11)
    loaded.load_checkpoint(ckpt.latest_checkpoint(tmp_path / "checkpoints"))
    assert loaded.train().global_step == 11  # not refused: it continues what it loaded


def test_overwrite_with_resume_is_refused_when_arguments_are_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="overwrite_output_dir=True with resume_from_checkpoint"):
        TrainingArguments(output_dir=str(tmp_path), overwrite_output_dir=True,
                          resume_from_checkpoint="latest")  # fmt: skip


def test_move_aside_takes_a_free_name_and_keeps_everything(tmp_path: Path) -> None:
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    names = []
    for n in range(3):
        root = tmp_path / "checkpoints"
        (root / f"checkpoint-{n}").mkdir(parents=True)
        (root / f"checkpoint-{n}" / "f").write_text(str(n))
        moved = ckpt.move_aside(root, now)
        assert not root.exists() and (moved / f"checkpoint-{n}" / "f").read_text() == str(n)
        names.append(moved.name)
    suffix = f"checkpoints-previous-{stamp}"
    assert names == [suffix, f"{suffix}-2", f"{suffix}-3"]


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_two_ranks_refuse_together(tmp_path: Path) -> None:
    """Real ranks (gloo): the main rank's verdict reaches rank 1 (no rank waits in a
    collective the other left): the launch exits non-zero, promptly, nothing moved.
    (The move itself is the main rank's alone: the one-rank test above checks it.)"""
    from test_distributed import launch

    make(tmp_path / "out", max_steps=4).train()  # an earlier run's checkpoint-4
    before = tree(tmp_path / "out" / "checkpoints")
    with pytest.raises(AssertionError, match="holds checkpoints of an earlier run"):
        launch(tmp_path, "--short", "6", "--long", "6", "--stop_sync_steps", "2")
    assert tree(tmp_path / "out" / "checkpoints") == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if "checkpoints" in p.name) == [
        "checkpoints"
    ]
