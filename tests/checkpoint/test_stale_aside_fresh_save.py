"""A ``checkpoint-STEP.old`` that a completed replacement could not remove (its
permissions) is not put back by a resume after a later, fresh save of that step (none
of that step to replace: rotation had removed it) crashed with its staging left:
`replaced.begin_save`, the save's first act, renames such a stale one out of
`restore_replaced`'s reach (``stale-checkpoint-STEP.old``). Before, the resume took the
staging for an interrupted replacement and resurrected the stale one as
``checkpoint-STEP``: an older checkpoint of that step, from before the run that
crashed, taken by ``latest``."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.replaced import begin_save, restore_replaced

pytestmark = pytest.mark.timeout(30)


def test_a_stale_old_is_not_put_back_after_a_fresh_save_crashed(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    stale = root / "checkpoint-8.old"
    stale.mkdir(parents=True)
    (stale / "what").write_text("the checkpoint-8 replaced long ago")
    (root / "checkpoint-4").mkdir()
    staging = begin_save(root, 8)  # (a fresh save of step 8: no checkpoint-8)
    (staging / "what").write_text("half of a new checkpoint-8")  # (then the crash)
    assert restore_replaced(root) == []
    assert not (root / "checkpoint-8").exists()
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-4"]
    kept = root / "stale-checkpoint-8.old" / "what"  # (renamed, its contents kept)
    assert kept.read_text() == "the checkpoint-8 replaced long ago"


def test_an_interrupted_replacement_is_still_put_back(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "checkpoint-8").mkdir(parents=True)
    staging = begin_save(root, 8)  # (a save over checkpoint-8: it stays until the commit)
    (staging / "what").write_text("new")
    (root / "checkpoint-8").rename(root / "checkpoint-8.old")  # (then the crash)
    assert restore_replaced(root) == [root / "checkpoint-8"]
