"""A rotation killed inside its deletion of an old checkpoint leaves no half-deleted
checkpoint that a listing, and so a resume, would take (`paths.rotate`).

`shutil.rmtree` removes a directory's files in the order the file system lists them:
killed half-way, it left ``checkpoint-N`` listed with some of its files; with its
``manifest.json`` gone first, it looked like a checkpoint from before manifests, taken
unverified by a resume whose newer checkpoints all fail verification. Now the directory
is renamed aside (``.deleting-checkpoint-N``) in one step before its files go, and the
next rotation ends a deletion that a kill cut short."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.checkpoint import paths


class Killed(BaseException):
    """The process killed here (nothing after it runs)."""


def make(root: Path, step: int) -> Path:
    path = paths.checkpoint_path(root, step)
    path.mkdir(parents=True)
    for name in ("manifest.json", "model.safetensors", "trainer_state.json"):
        (path / name).write_text(name)
    return path


@pytest.mark.timeout(30)
def test_a_deletion_cut_short_is_never_listed_and_the_next_rotation_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for step in (10, 20, 30):
        make(tmp_path, step)
    real = shutil.rmtree

    def killed_after_the_manifest(path: Any, *args: Any, **kwargs: Any) -> None:
        (Path(path) / "manifest.json").unlink()  # (the first file it happened to remove)
        raise Killed

    monkeypatch.setattr(paths.shutil, "rmtree", killed_after_the_manifest)
    with pytest.raises(Killed):
        paths.rotate(tmp_path, 2, keep=paths.checkpoint_path(tmp_path, 30))
    # before: checkpoint-10 listed, its manifest gone, its other files there
    assert [p.name for p in paths.list_checkpoints(tmp_path)] == ["checkpoint-20", "checkpoint-30"]

    monkeypatch.setattr(paths.shutil, "rmtree", real)
    make(tmp_path, 40)
    removed = paths.rotate(tmp_path, 2, keep=paths.checkpoint_path(tmp_path, 40))
    assert [p.name for p in removed] == ["checkpoint-20"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-30", "checkpoint-40"]
