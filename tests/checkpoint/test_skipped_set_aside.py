"""A resume from ``latest`` that skips newer checkpoints which do not verify moves them
aside (`checkpoint.later_runs.set_aside_later`), as a resume from a named older
checkpoint does: the run continued from the one before them starts another history.

Before, they stayed in the checkpoint folder. A checkpoint skipped for a reason that
passes (its permission bits, an unreadable file on a shared file system) was then lost
to the new run's rotation: with ``max_to_keep=1`` its first save deleted the skipped
checkpoint-20, steps 10 to 20 of the first run gone for good, its files fine once
readable again. With more kept, a later ``latest``, the file readable again, took the
skipped checkpoint of the abandoned history over the new run's, dropping its work.
The transient fault is a file made a symbolic link to itself (its stat fails, even for
root), its bytes put back after the resume."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}
#: the file of checkpoint-20 made unreadable for a while
FILE = "rank_0/buffer.safetensors"


def unreadable_for_a_while(path: Path) -> bytes:
    """`path` made a link to itself (unreadable); returns its bytes, to put back."""
    data = path.read_bytes()
    path.unlink()
    path.symlink_to(path.name)
    return data


def readable_again(path: Path, data: bytes) -> None:
    path.unlink()
    path.write_bytes(data)


def first_run(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """checkpoint-10 and -20, 20's FILE unreadable: the root, FILE's and the model's bytes."""
    run(dict(BASE, output_dir=str(tmp_path / "out"), max_steps=20))
    root = tmp_path / "out" / "checkpoints"
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10", "checkpoint-20"]
    weights = (root / "checkpoint-20" / "model.safetensors").read_bytes()
    return root, unreadable_for_a_while(root / "checkpoint-20" / FILE), weights


def test_rotation_does_not_delete_a_newer_checkpoint_the_resume_skipped(tmp_path: Path) -> None:
    root, data, weights = first_run(tmp_path)
    config = dict(BASE, output_dir=str(tmp_path / "out"), max_to_keep=1, max_steps=15)
    run(dict(config, resume_from_checkpoint="latest"))
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-15"]
    # before: checkpoint-20 deleted by the save of 15 (no folder beside the root)
    (aside,) = root.parent.glob("checkpoints-after-checkpoint-10-*")
    kept = aside / "checkpoint-20"
    readable_again(kept / FILE, data)
    assert (kept / "model.safetensors").read_bytes() == weights


def test_a_later_latest_takes_the_new_runs_checkpoint_not_the_skipped_one(tmp_path: Path) -> None:
    root, data, _ = first_run(tmp_path)
    config = dict(BASE, output_dir=str(tmp_path / "out"), max_to_keep=3, save_steps=5)
    run(dict(config, max_steps=15, resume_from_checkpoint="latest"))
    skipped = root / "checkpoint-20"
    if os.path.lexists(skipped / FILE):  # (before: still there, now readable again)
        readable_again(skipped / FILE, data)
    resumed = run(dict(config, max_steps=25, resume_from_checkpoint="latest"))
    # before: resumed from the abandoned run's checkpoint-20 (its first loss at step 21)
    assert [step for step, _ in resumed["losses"]][0] == 16, resumed["losses"][:3]
