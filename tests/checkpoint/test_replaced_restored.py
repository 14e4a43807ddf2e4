"""A replacement of a checkpoint that a crash interrupted, where the file system has no
atomic exchange (NFS and other shared file systems: `paths.commit` renames the old one
to ``checkpoint-STEP.old``, then the new one in): the resume puts the old one back
(`checkpoint.replaced.restore_replaced`) and continues from it.

Before, a crash between the two renames left no ``checkpoint-STEP``: with
``max_to_keep=1`` the resume from ``latest`` found no checkpoint and started afresh
(its first loss at step 1, every step trained again), the complete checkpoint still on
disk as ``checkpoint-20.old``. The crash is a failing second ``os.replace``, as in
tests/checkpoint/test_commit_exchange.py (which covers the exchange's own path)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.replaced import restore_replaced

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


def interrupted_replacement(root: Path, step: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save of `step` over its checkpoint, without the exchange, crashed between the
    rename of the old one aside and the rename of the new one in."""
    final = ckpt.checkpoint_path(root, step)
    staging = ckpt.staging_path(root, step)
    shutil.copytree(final, staging)  # (the new one: complete, as at its commit)
    renames: list[object] = []

    def crash_after_one_rename(src: Any, dst: Any) -> None:
        if renames:
            raise KeyboardInterrupt("the node died")
        renames.append(src)
        os.rename(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(ckpt, "_exchange", lambda a, b: False)  # (no RENAME_EXCHANGE here)
        patch.setattr(ckpt.os, "replace", crash_after_one_rename)
        with contextlib.suppress(KeyboardInterrupt):
            ckpt.commit(staging, final)
    left = sorted(n for n in os.listdir(root) if n != "history.json")  # (the run's record)
    assert left == [f".tmp-checkpoint-{step}", f"checkpoint-{step}.old"]


def test_latest_resumes_from_a_checkpoint_an_interrupted_replacement_left_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = dict(BASE, output_dir=str(tmp_path / "out"), max_to_keep=1)
    run(dict(config, max_steps=20))
    root = tmp_path / "out" / "checkpoints"
    interrupted_replacement(root, 20, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(config, max_steps=30, resume_from_checkpoint="latest"))
    # before: no checkpoint found, a fresh start (its losses from step 1)
    assert [step for step, _ in resumed["losses"]][0] == 21, resumed["losses"][:3]
    assert "put back from checkpoint-20.old" in caplog.text
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-30"]


def test_the_one_set_aside_last_is_put_back_and_a_stale_one_left(tmp_path: Path) -> None:
    for name in ("checkpoint-5.old", "checkpoint-5.old-1", "checkpoint-5.old-2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "which").write_text(name)
    (tmp_path / ".tmp-checkpoint-5").mkdir()  # the new one, never renamed in
    (tmp_path / "checkpoint-7").mkdir()  # replaced completely: its .old is not taken
    (tmp_path / "checkpoint-7.old").mkdir()
    # left aside as unremovable by a replacement that completed, its step since rotated
    # out: no staging, not put back (rotation would meet it again)
    (tmp_path / "checkpoint-8.old").mkdir()
    (tmp_path / "checkpoint-9.old.txt").mkdir()  # (not a name `_aside` gives)
    restored = restore_replaced(tmp_path)
    assert [p.name for p in restored] == ["checkpoint-5"]
    assert (tmp_path / "checkpoint-5" / "which").read_text() == "checkpoint-5.old-2"
    for left in ("checkpoint-7.old", "checkpoint-8.old", "checkpoint-9.old.txt"):
        assert (tmp_path / left).is_dir(), left
    assert restore_replaced(tmp_path / "none") == []
