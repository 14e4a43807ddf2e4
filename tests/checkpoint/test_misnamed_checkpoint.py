"""A checkpoint whose name is not the step it holds (renamed by a user, copied over by
a sync tool or a bad copy: ``checkpoint-30`` holding step 10's state) does not verify
(`checkpoint.manifest.misnamed`): ``latest`` skips it with one warning, as any
checkpoint that does not verify, and moves it aside; named, it is an error.

Before, ``latest`` took it by its name, the highest step: the run resumed at step 10
while checkpoint-20, the real newest, was there (steps 11 to 20 trained again, and each
requeue took the misnamed one again until a save of step 30 replaced it). Checked with
and without a manifest (an earlier version's checkpoint: its trainer state's step)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer import CheckpointError
from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(dict(BASE, output_dir=str(tmp_path_factory.mktemp("full"))))


def with_a_misnamed_copy(tmp_path: Path, with_manifest: bool) -> Path:
    """checkpoint-10, -20, and checkpoint-30 a copy of checkpoint-10; returns the root."""
    run(dict(BASE, output_dir=str(tmp_path / "out"), max_steps=20))
    root = tmp_path / "out" / "checkpoints"
    shutil.copytree(root / "checkpoint-10", root / "checkpoint-30")
    if not with_manifest:
        (root / "checkpoint-30" / manifest.MANIFEST).unlink()  # (as before manifests)
        (root / "checkpoint-30" / ckpt.FORMAT_FILE).unlink()
    return root


@pytest.mark.parametrize("with_manifest", [True, False], ids=["manifest", "no-manifest"])
def test_latest_skips_a_checkpoint_named_for_another_step(
    tmp_path: Path,
    uninterrupted: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    with_manifest: bool,
) -> None:
    root = with_a_misnamed_copy(tmp_path, with_manifest)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(dict(BASE, output_dir=str(tmp_path / "out"), resume_from_checkpoint="latest"))
    # before: resumed from checkpoint-30 at step 10 (its first loss at step 11)
    assert resumed["losses"] == [(s, loss) for s, loss in uninterrupted["losses"] if s > 20]
    assert resumed["params"] == uninterrupted["params"]
    assert resumed["global_step"] == uninterrupted["global_step"]
    file = manifest.MANIFEST if with_manifest else "trainer_state.json"
    said = [r.getMessage() for r in caplog.records if "as its name says" in r.getMessage()]
    assert len(said) == 1, said
    assert f"{root / 'checkpoint-30' / file}: holds step 10, not step 30" in said[0]
    # moved out of the run's way, as any skipped checkpoint newer than the one taken
    (aside,) = root.parent.glob("checkpoints-after-checkpoint-20-*")
    assert (aside / "checkpoint-30").is_dir()


def test_a_named_checkpoint_of_another_step_is_an_error(tmp_path: Path) -> None:
    root = with_a_misnamed_copy(tmp_path, with_manifest=True)
    with pytest.raises(CheckpointError, match="holds step 10, not step 30 as its name says"):
        run(
            dict(
                BASE,
                output_dir=str(tmp_path / "out"),
                resume_from_checkpoint=str(root / "checkpoint-30"),
            )
        )


def test_only_misnamed_checkpoints_are_refused(tmp_path: Path) -> None:
    """A checkpoint copied under a name of the user's (not ``checkpoint-N``) is taken."""
    root = with_a_misnamed_copy(tmp_path, with_manifest=True)
    assert manifest.misnamed(root / "checkpoint-20") is None
    shutil.copytree(root / "checkpoint-10", tmp_path / "my-copy")
    assert manifest.misnamed(tmp_path / "my-copy") is None
    assert [p.name for p in ckpt.list_checkpoints(root)][-1] == "checkpoint-30"
