"""Checkpoint directory functions: atomic commit, rotation, 'latest'."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import checkpoint as ckpt


def make(root: Path, step: int) -> Path:
    staging = ckpt.begin(root, step)
    (staging / "trainer_state.json").write_text("{}")
    return ckpt.commit(staging, ckpt.checkpoint_path(root, step))


def test_commit_renames_and_leaves_no_staging(tmp_path: Path) -> None:
    final = make(tmp_path, 7)
    assert final.name == "checkpoint-7" and (final / "trainer_state.json").is_file()
    assert not ckpt.staging_path(tmp_path, 7).exists()


def test_staging_directories_are_never_listed(tmp_path: Path) -> None:
    make(tmp_path, 2)
    crashed = ckpt.begin(tmp_path, 4)  # a save that never committed
    (crashed / "partial").write_text("x")
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-2"]
    assert ckpt.latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert not (ckpt.begin(tmp_path, 4) / "partial").exists()  # a new save starts clean


def test_order_is_numeric_not_lexicographic(tmp_path: Path) -> None:
    for step in (9, 10, 100):
        make(tmp_path, step)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == [
        "checkpoint-9",
        "checkpoint-10",
        "checkpoint-100",
    ]


def test_rotate_keeps_the_newest(tmp_path: Path) -> None:
    for step in (1, 2, 3, 4):
        make(tmp_path, step)
    removed = ckpt.rotate(tmp_path, 2)
    assert [p.name for p in removed] == ["checkpoint-1", "checkpoint-2"]
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-3", "checkpoint-4"]
    with pytest.raises(ValueError):
        ckpt.rotate(tmp_path, 0)


def test_commit_over_an_existing_checkpoint_replaces_it(tmp_path: Path) -> None:
    make(tmp_path, 5)
    staging = ckpt.begin(tmp_path, 5)
    (staging / "trainer_state.json").write_text('{"new": true}')
    ckpt.commit(staging, ckpt.checkpoint_path(tmp_path, 5))
    assert "new" in (tmp_path / "checkpoint-5" / "trainer_state.json").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-5"]


def test_resolve_resume(tmp_path: Path) -> None:
    assert ckpt.resolve_resume(None, tmp_path) is None
    assert ckpt.resolve_resume("latest", tmp_path) is None  # first run of a job script
    make(tmp_path, 3)
    assert ckpt.resolve_resume("latest", tmp_path) == tmp_path / "checkpoint-3"
    assert (
        ckpt.resolve_resume(str(tmp_path / "checkpoint-3"), tmp_path) == tmp_path / "checkpoint-3"
    )
    with pytest.raises(FileNotFoundError, match="checkpoint-3"):
        ckpt.resolve_resume(str(tmp_path / "checkpoint-4"), tmp_path)
