"""User trial 33 ("ways to lose work"), severity MEDIUM.

What a user did: resumed a study (``--resume_from_checkpoint PATH``) from a checkpoint
written by a newer melissa-trainer (its ``format.json`` says format 3, its manifest
verifies: a colleague's run, or a job requeued on a node with an older install).

What happened: ``CheckpointError: cannot load checkpoint ... (format.json): ValueError:
checkpoint format 3: this version of melissa-trainer reads formats 1 to 2; the files
read, but do not fit this run (another model, optimizer or version?): build the model,
optimizer and scheduler as the run that wrote it did ..., or start afresh: another
--output_dir, or --overwrite_output_dir``: advice about the model, and starting afresh
(discarding the study's progress), where the one fix is to upgrade.

What was expected: the fix named, as the manifest's own check of a newer version says
it ("upgrade melissa-trainer to resume from it"), and no advice about the model, which
is not at fault.

Fixed: `checkpoint.format.format_of` raises a `FormatVersionError` that says what to do
(upgrade; or, for no known version, a damaged or edited file), which `naming_file` passes
on without the model's advice. Both tests failed before the fix.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import CheckpointError, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.format import FORMAT_FILE, FORMAT_VERSION
from melissa_trainer.checkpoint.manifest import MANIFEST

pytestmark = pytest.mark.timeout(120)


def _trainer(out: Path, max_steps: int, resume: str | None = None) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out), batch_size=4, buffer="fifo", buffer_size=16, watermark=4,
        report_to="none", disable_progress_bar=True, stop_sync_steps=2,
        max_steps=max_steps, resume_from_checkpoint=resume,
    )  # fmt: skip
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(64, seed=1),
        process_sample=xy,
    )


def _as_newer_version(checkpoint: Path, version: int) -> None:
    """Make `checkpoint` say format `version`, its manifest kept true (so it verifies,
    as a newer version's own checkpoint does)."""
    fmt = checkpoint / FORMAT_FILE
    described = json.loads(fmt.read_text())
    described["format_version"] = version
    fmt.write_text(json.dumps(described))
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    data = fmt.read_bytes()
    manifest["files"][FORMAT_FILE].update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (checkpoint / MANIFEST).write_text(json.dumps(manifest))


def test_a_newer_versions_checkpoint_says_to_upgrade(tmp_path: Path) -> None:
    _trainer(tmp_path / "first", 6).train()
    newer = tmp_path / "elsewhere" / "checkpoint-6"
    shutil.copytree(tmp_path / "first" / "checkpoints" / "checkpoint-6", newer)
    _as_newer_version(newer, FORMAT_VERSION + 1)
    trainer = _trainer(tmp_path / "second", 12, resume=str(newer))
    with pytest.raises(CheckpointError) as caught:
        trainer.train()
    message = str(caught.value)
    assert f"format {FORMAT_VERSION + 1}" in message
    assert "upgrade melissa-trainer" in message
    assert "build the model" not in message  # the model is not at fault


@pytest.mark.parametrize("version", [1, 0, "2"])
def test_a_format_file_of_no_known_version_is_named_as_damaged(
    tmp_path: Path, version: object
) -> None:
    """A `format.json` saying 1 (format 1 had none), 0 or a string: not a newer
    version's; said as a damaged or edited file, not as a model that does not fit."""
    _trainer(tmp_path / "first", 6).train()
    odd = tmp_path / "elsewhere" / "checkpoint-6"
    shutil.copytree(tmp_path / "first" / "checkpoints" / "checkpoint-6", odd)
    _as_newer_version(odd, version)  # type: ignore[arg-type]
    trainer = _trainer(tmp_path / "second", 12, resume=str(odd))
    with pytest.raises(CheckpointError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "upgrade" not in message
    assert "build the model" not in message
    assert "damaged or edited" in message
