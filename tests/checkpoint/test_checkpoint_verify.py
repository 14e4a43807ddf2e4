"""Checkpoints verified before use: a corrupt latest one is skipped, with one warning
naming the file, for the intact one before it; an explicit corrupt one is an error
naming the file; every load error names its file; rotation never deletes the
checkpoint just written in favour of a newer, corrupt one.

The oracle of "resumed exactly once" is an uninterrupted run of the same scenario
(`resume_scenario.run`, deterministic): the resumed run's losses are the uninterrupted
run's after the checkpoint it resumed from, step for step, and it ends with the same
weights (bitwise) and buffer counters.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer import CheckpointError
from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.trainer import resume_choice

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(dict(BASE, output_dir=str(tmp_path_factory.mktemp("full"))))


def two_checkpoints(tmp_path: Path) -> Path:
    """checkpoint-10 and checkpoint-20 under tmp_path/out/checkpoints; returns the root."""
    run(dict(BASE, output_dir=str(tmp_path / "out"), max_steps=20))
    root = tmp_path / "out" / "checkpoints"
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-10", "checkpoint-20"]
    return root


def truncate(path: Path, keep: float = 0.5) -> None:
    os.truncate(path, int(path.stat().st_size * keep))


def garbage(path: Path) -> None:
    """Same size, other bytes: only the hash can tell."""
    path.write_bytes(bytes((i * 37 + 11) % 256 for i in range(path.stat().st_size)))


def _checkpoint_warning(record: logging.LogRecord) -> str | None:
    """A warning about checkpoints (not, say, the end-of-run reuse line's)."""
    if record.levelno >= logging.WARNING and "checkpoint" in record.name:
        return record.getMessage()
    return None


def a_directory(path: Path) -> None:
    """The file replaced by a folder: unreadable, even to root (whom permission bits do
    not stop; tests/examples/test_example_heat_output_dir.py has them bite)."""
    path.unlink()
    path.mkdir()


def a_symlink_loop(path: Path) -> None:
    """The file replaced by a link to itself: its stat fails (ELOOP), even for root."""
    path.unlink()
    path.symlink_to(path.name)


#: corruption -> (the file, what the warning says about it)
CORRUPTIONS: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "unreadable-manifest": (
        manifest.MANIFEST,
        a_directory,
        "unreadable manifest (Is a directory)",
    ),
    "unreadable-buffer": (
        "rank_0/buffer.safetensors",
        a_symlink_loop,
        "unreadable (Too many levels of symbolic links)",
    ),
    # a file no rank wrote (the stray-file check: a resume, not the manifest's own function)
    "stray-file": ("rank_0/stray.bin", lambda p: p.write_bytes(b"x"), "unexpected: not in"),
    "truncated-model": ("model.safetensors", truncate, "size mismatch"),
    "truncated-buffer": ("rank_0/buffer.safetensors", truncate, "size mismatch"),
    "empty-optimizer": ("optimizer.bin", lambda p: truncate(p, 0), "size mismatch: 0 bytes"),
    "truncated-source": ("rank_0/source.json", lambda p: truncate(p, 0.5), "size mismatch"),
    "missing-trainer-state": ("trainer_state.json", Path.unlink, "missing"),
    "garbage-rng": ("random_states_0.pkl", garbage, "hash mismatch"),
}


def as_before_manifests(checkpoint: Path) -> None:
    """`checkpoint` as a version before manifests wrote it: no manifest, nor
    ``format.json`` (which came after manifests: with it, a missing manifest is damage)."""
    (checkpoint / manifest.MANIFEST).unlink()
    (checkpoint / ckpt.FORMAT_FILE).unlink()


def assert_resumed_exactly_from(resumed: dict[str, Any], full: dict[str, Any], step: int) -> None:
    assert resumed["losses"] == [(s, loss) for s, loss in full["losses"] if s > step]
    assert resumed["params"] == full["params"]  # bitwise
    for key in ("global_step", "samples_seen", "total_samples_seen", "buffer"):
        assert resumed[key] == full[key], key


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_latest_skips_a_corrupt_checkpoint_with_one_warning_and_resumes_exactly(
    name: str, tmp_path: Path, uninterrupted: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    root = two_checkpoints(tmp_path)
    file, corrupt, what = CORRUPTIONS[name]
    corrupt(root / "checkpoint-20" / file)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    assert_resumed_exactly_from(resumed, uninterrupted, 10)
    warnings = [m for r in caplog.records if (m := _checkpoint_warning(r)) is not None]
    assert len(warnings) == 1, warnings
    assert f"{root / 'checkpoint-20' / file}: {what}" in warnings[0]


def test_an_explicit_corrupt_checkpoint_is_an_error_naming_the_file(tmp_path: Path) -> None:
    root = two_checkpoints(tmp_path)
    truncate(root / "checkpoint-20" / "model.safetensors")
    config = dict(BASE, output_dir=str(tmp_path / "out"))
    with pytest.raises(CheckpointError) as caught:
        run(dict(config, resume_from_checkpoint=str(root / "checkpoint-20")))
    message = str(caught.value)
    assert f"{root / 'checkpoint-20' / 'model.safetensors'}: size mismatch" in message
    assert str(root / "checkpoint-10") in message  # what to resume from instead
    assert caught.value.file == "model.safetensors"


def test_a_corrupt_manifest_is_a_corrupt_checkpoint(
    tmp_path: Path, uninterrupted: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    root = two_checkpoints(tmp_path)
    truncate(root / "checkpoint-20" / manifest.MANIFEST)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    assert_resumed_exactly_from(resumed, uninterrupted, 10)
    warnings = [m for r in caplog.records if (m := _checkpoint_warning(r)) is not None]
    assert len(warnings) == 1 and "unreadable manifest" in warnings[0], warnings


def test_an_unexpected_file_fails_verification(tmp_path: Path) -> None:
    root = two_checkpoints(tmp_path)
    (root / "checkpoint-20" / "rank_0" / "stray.bin").write_bytes(b"x")
    entries = manifest.read(root / "checkpoint-20")
    assert entries is not None
    assert [str(p) for p in manifest.unexpected(root / "checkpoint-20", entries)] == [
        "rank_0/stray.bin: unexpected: not in the manifest, where the trainer's own files are"
    ]


def test_no_checkpoint_that_verifies_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    root = two_checkpoints(tmp_path)
    for step in (10, 20):
        truncate(root / f"checkpoint-{step}" / "optimizer.bin")
    with pytest.raises(CheckpointError, match="no checkpoint under .* verifies"):
        run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))


# -- checkpoints without a manifest (earlier versions): accepted, load errors named ------------


def test_a_checkpoint_without_manifest_is_resumed_from_with_a_warning(
    tmp_path: Path, uninterrupted: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    root = two_checkpoints(tmp_path)
    as_before_manifests(root / "checkpoint-20")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    assert_resumed_exactly_from(resumed, uninterrupted, 20)
    warnings = [m for r in caplog.records if (m := _checkpoint_warning(r)) is not None]
    assert len(warnings) == 1 and "resuming from it unverified" in warnings[0], warnings


@pytest.mark.parametrize(
    ("file", "corrupt", "says"),
    [
        ("model.safetensors", truncate, "SafetensorError"),
        ("optimizer.bin", lambda p: truncate(p, 0), "empty (0 bytes)"),
        ("rank_0/source.json", truncate, "JSONDecodeError"),
        ("rank_0/buffer.safetensors", truncate, "SafetensorError"),
        ("trainer_state.json", Path.unlink, "missing"),
        # Accelerate's load_state ignores a damaged RNG file, logging at INFO level only
        ("random_states_0.pkl", garbage, "BadZipFile"),
    ],
)
def test_every_load_error_of_an_unverified_checkpoint_names_the_file(
    tmp_path: Path, file: str, corrupt: Callable[[Path], None], says: str
) -> None:
    root = two_checkpoints(tmp_path)
    as_before_manifests(root / "checkpoint-20")
    corrupt(root / "checkpoint-20" / file)
    with pytest.raises(CheckpointError) as caught:
        run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    message = str(caught.value)
    assert message.startswith(f"cannot load {root / 'checkpoint-20' / file}: "), message
    assert says in message
    assert (
        "resume_from_checkpoint=PATH (--resume_from_checkpoint PATH on the command line)" in message
    )
    assert f"command line): {root / 'checkpoint-10'}" in message
    assert caught.value.file == file


# -- rotation -------------------------------------------------------------------------------


def test_rotation_keeps_the_new_checkpoint_over_a_newer_corrupt_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resumed from checkpoint-10 (20 is corrupt, and its move aside fails: a folder
    `chmod 000`, tests/checkpoint/test_skipped_set_aside.py moves the others), a save at
    15 with max_to_keep=1: by step alone, 15, the one intact checkpoint, would go and
    the corrupt 20 stay."""
    root = two_checkpoints(tmp_path)
    truncate(root / "checkpoint-20" / "model.safetensors")
    monkeypatch.setattr(resume_choice, "set_aside_later", lambda *a, **k: None)
    config = dict(BASE, output_dir=str(tmp_path / "out"), max_to_keep=1, max_steps=15)
    run(dict(config, resume_from_checkpoint="latest"))
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-15"]
    assert not list(root.parent.glob("checkpoints-after-*"))  # (rotation's doing, not a move)


def test_rotate_never_deletes_keep(tmp_path: Path) -> None:
    for step in (10, 15, 20):
        ckpt.checkpoint_path(tmp_path, step).mkdir()
    removed = ckpt.rotate(tmp_path, 2, keep=tmp_path / "checkpoint-15")
    assert [p.name for p in removed] == ["checkpoint-10"]
    removed = ckpt.rotate(tmp_path, 1, keep=tmp_path / "checkpoint-15")
    assert [p.name for p in removed] == ["checkpoint-20"]
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-15"]


# -- the manifest itself ----------------------------------------------------------------------


def test_the_manifest_lists_every_file_with_its_size_and_hash(tmp_path: Path) -> None:
    root = two_checkpoints(tmp_path)
    path = root / "checkpoint-20"
    body = json.loads((path / manifest.MANIFEST).read_text())
    assert body["step"] == 20 and body["format"] == manifest.FORMAT
    on_disk = {
        p.relative_to(path).as_posix()
        for p in path.rglob("*")
        if p.is_file() and p.name != manifest.MANIFEST
    }
    assert set(body["files"]) == on_disk
    for rel, entry in body["files"].items():
        assert entry["size"] == (path / rel).stat().st_size
        assert entry["sha256"] == hashlib.sha256((path / rel).read_bytes()).hexdigest()
        assert entry["rank"] == 0
    assert not list(root.glob(".tmp-*"))
