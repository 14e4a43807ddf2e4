"""A correctly numbered checkpoint of another training copied into output_dir is told
from the folder's own by its history (`checkpoint.history`, `trainer.history_check`).

Before, ``latest`` took it as the folder's own and resumed silently: ``one``'s
checkpoint-30 copied beside ``two``'s checkpoint-10 resumed ``two`` at step 31, with
another run's model, buffer and sample record."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer.checkpoint import history, manifest
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import CheckpointError
from melissa_trainer.core.state import STATE_FILE

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


def names(root: Path) -> list[str]:
    return [p.name for p in ckpt.list_checkpoints(root)]


def train(tmp_path: Path, folder: str, max_steps: int, **more: Any) -> dict[str, Any]:
    """One run in ``tmp_path/folder`` (returns `resume_scenario.run`'s record)."""
    return run(dict(BASE, output_dir=str(tmp_path / folder), max_steps=max_steps, **more))


def test_latest_refuses_a_newer_checkpoint_of_another_training(tmp_path: Path) -> None:
    train(tmp_path, "one", 30)
    train(tmp_path, "two", 10)
    one, two = tmp_path / "one" / "checkpoints", tmp_path / "two" / "checkpoints"
    copied = two / "checkpoint-30"
    shutil.copytree(one / "checkpoint-30", copied)
    with pytest.raises(CheckpointError) as caught:  # before: resumed at step 31
        train(tmp_path, "two", 40, resume_from_checkpoint="latest")
    message = str(caught.value)
    theirs, ours = history.history_of(copied), history.read_record(two)
    assert f"checkpoint-30, is of another training (history {theirs})" in message
    record = f"(history {ours}, in {two / history.RECORD};"
    assert f"{record} its checkpoints: checkpoint-10)" in message
    assert f"pass --resume_from_checkpoint {copied}" in message
    assert names(two) == ["checkpoint-10", "checkpoint-30"]  # (nothing moved by a refusal)
    # taken on purpose: it continues, and this folder's own is moved aside, not deleted
    taken = train(tmp_path, "two", 40, resume_from_checkpoint=str(copied))
    assert taken["losses"][0][0] == 31
    (aside,) = two.parent.glob("checkpoints-other-*")
    assert names(aside) == ["checkpoint-10"]
    assert names(two) == ["checkpoint-30", "checkpoint-40"]
    assert history.read_record(two) == theirs == history.history_of(two / "checkpoint-40")
    again = train(tmp_path, "two", 50, resume_from_checkpoint="latest")
    assert again["losses"][0][0] == 41  # the requeue continues the history taken


def test_an_older_checkpoint_of_another_training_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``latest`` takes the folder's own checkpoint-10; ``one``'s checkpoint-5 copied
    in (a lower step) would be the first its rotation deletes: it is moved aside.
    Before, it stayed."""
    train(tmp_path, "one", 5, save_steps=5)
    train(tmp_path, "two", 10)
    one, two = tmp_path / "one" / "checkpoints", tmp_path / "two" / "checkpoints"
    shutil.copytree(one / "checkpoint-5", two / "checkpoint-5")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = train(tmp_path, "two", 20, resume_from_checkpoint="latest")
    assert resumed["losses"][0][0] == 11
    (aside,) = two.parent.glob("checkpoints-other-*")
    assert names(aside) == ["checkpoint-5"]
    assert names(two) == ["checkpoint-10", "checkpoint-20"]
    said = [r.getMessage() for r in caplog.records if str(aside) in r.getMessage()]
    assert len(said) == 1 and "checkpoints of another training" in said[0], said


def test_unknown_histories_are_never_foreign(tmp_path: Path) -> None:
    """A checkpoint without a history (a version before it) in a folder without a
    record resumes as before: the run draws a history and records it. (A checkpoint of
    format 1, tests/checkpoint/test_old_checkpoint.py, has none either.)"""
    train(tmp_path, "two", 10)
    two = tmp_path / "two" / "checkpoints"
    (two / history.RECORD).unlink()
    state_file = two / "checkpoint-10" / STATE_FILE
    state = json.loads(state_file.read_text())
    del state["history"]
    state_file.write_text(json.dumps(state))
    entries = manifest.read(two / "checkpoint-10")  # (its entry brought up to date)
    assert entries is not None
    size, digest = manifest.hash_file(state_file)
    entries[STATE_FILE].update({"size": size, manifest.HASH: digest})
    manifest.write(two / "checkpoint-10", entries, 10)
    resumed = train(tmp_path, "two", 20, resume_from_checkpoint="latest")
    assert resumed["losses"][0][0] == 11
    drawn = history.read_record(two)
    assert drawn is not None and history.history_of(two / "checkpoint-20") == drawn
    assert names(two) == ["checkpoint-10", "checkpoint-20"]
