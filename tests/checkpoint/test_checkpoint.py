"""Checkpoint directory functions: atomic commit, rotation, 'latest'."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import permission_bits_bite

from melissa_trainer.checkpoint import paths as ckpt


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
    with pytest.raises(ValueError, match="max_to_keep must be >= 1, got 0"):
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


def fsync_recorder(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Record ("fsync", path) for each os.fsync and ("rename", dst) for each os.replace."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("rename", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def test_fsync_tree_syncs_every_file_and_directory_but_the_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rel in ("a", "rank_0/b", "rank_0/sub/c", "rank_1/d"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "link").symlink_to(tmp_path / "a")
    events = fsync_recorder(monkeypatch)
    assert ckpt.fsync_tree(tmp_path, skip={"rank_1"}) == 3
    synced = [Path(p) for _, p in events]
    files = [tmp_path / "a", tmp_path / "rank_0/b", tmp_path / "rank_0/sub/c"]
    dirs = [tmp_path / "rank_0/sub", tmp_path / "rank_0", tmp_path]
    assert sorted(synced) == sorted(files + dirs)
    # a directory after everything inside it, the root last
    assert synced.index(tmp_path / "rank_0/sub/c") < synced.index(tmp_path / "rank_0/sub")
    assert synced.index(tmp_path / "rank_0/sub") < synced.index(tmp_path / "rank_0")
    assert synced[-1] == tmp_path


@pytest.mark.timeout(60)
def test_save_checkpoint_fsyncs_every_file_before_the_rename_and_the_parents_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import linear_samples, small_model, xy

    from melissa_trainer import OnlineTrainer, TrainingArguments

    model = small_model(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=4, buffer_size=8, report_to="none",
        disable_progress_bar=True, max_steps=2, save_at_end=False,
    )  # fmt: skip
    trainer = OnlineTrainer(
        model, args, optimizer, scheduler, train_source=list(linear_samples(16)),
        process_sample=xy,
    )  # fmt: skip
    trainer.train()
    events = fsync_recorder(monkeypatch)
    final = trainer.save_checkpoint()
    staging = ckpt.staging_path(final.parent, 2)
    rename = events.index(("rename", str(final)))
    before = {Path(p) for kind, p in events[:rename] if kind == "fsync"}
    written = [p for p in final.rglob("*")]
    assert len([p for p in written if p.is_file()]) >= 10  # model, optimizer, rng, rank_0/...
    for path in written:
        assert staging / path.relative_to(final) in before, f"{path} was not fsynced"
    assert staging in before
    after = [Path(p) for kind, p in events[rename:] if kind == "fsync"]
    assert final.parent in after and final.parent.parent in after


def test_each_rank_fsyncs_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = ckpt.begin(tmp_path, 4)
    names = ["model.safetensors", "trainer_state.json", "random_states_0.pkl"]
    names += ["random_states_1.pkl", "rank_0/buffer.json", "rank_1/buffer.json"]
    for rel in names:
        (staging / rel).parent.mkdir(exist_ok=True)
        (staging / rel).write_text(rel)
    events = fsync_recorder(monkeypatch)
    assert ckpt.fsync_rank_files(staging, 1, 2) == 2
    assert {Path(p).relative_to(staging).as_posix() for _, p in events} == {
        "rank_1/buffer.json", "rank_1", "random_states_1.pkl"
    }  # fmt: skip
    events.clear()
    assert ckpt.fsync_rank_files(staging, 0, 2) == 4
    assert {Path(p).relative_to(staging).as_posix() for _, p in events} == {
        "model.safetensors", "trainer_state.json", "random_states_0.pkl",
        "rank_0/buffer.json", "rank_0", ".",
    }  # fmt: skip


COMMIT = """
import sys
from melissa_trainer.checkpoint import paths as ckpt
root, step = sys.argv[1], int(sys.argv[2])
staging = ckpt.begin(root, step)
(staging / "trainer_state.json").write_text(sys.argv[3])
ckpt.commit(staging, ckpt.checkpoint_path(root, step))
"""


@pytest.mark.e2e
def test_commit_over_a_checkpoint_it_cannot_remove_succeeds_and_leaves_it_aside(
    tmp_path: Path,
) -> None:
    """A resumed run saving the step of a checkpoint it skipped as unreadable (a folder
    of it `chmod 000`): the new one takes its place, the old one is left aside under a
    name no resume looks at, with a warning; a second save of that step too. Once, the
    save failed (and stopped training) on removing the old one. In a subprocess that
    meets permission bits as a user does (`permission_bits_bite`)."""
    old = make(tmp_path, 5)
    (old / "rank_0").mkdir()
    (old / "rank_0" / "buffer.json").write_text("{}")
    (old / "rank_0").chmod(0)
    try:
        for n, aside in ((1, "checkpoint-5.old"), (2, "checkpoint-5.old-1")):
            proc = subprocess.run(
                [sys.executable, "-c", COMMIT, str(tmp_path), "5", f'{{"new": {n}}}'],
                capture_output=True, text=True, timeout=60, preexec_fn=permission_bits_bite,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert f'"new": {n}' in (tmp_path / "checkpoint-5" / "trainer_state.json").read_text()
            assert f"could not remove the checkpoint it replaced, now {tmp_path / aside}" in (
                proc.stderr
            ), proc.stderr
            if n == 1:
                (tmp_path / "checkpoint-5" / "rank_0").mkdir()  # unremovable again
                (tmp_path / "checkpoint-5" / "rank_0" / "x").write_text("x")
                (tmp_path / "checkpoint-5" / "rank_0").chmod(0)
        assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-5"]
    finally:
        for folder in tmp_path.glob("checkpoint-5*/rank_0"):
            folder.chmod(0o755)
