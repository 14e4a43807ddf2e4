"""Files a hook writes into a checkpoint in `on_save` (Hugging Face callbacks' habit)
are not the trainer's state: the resume takes the checkpoint, its own files verified,
with one warning naming them; a file not in the manifest where the trainer reads its
own files (a ``rank_*`` folder, Accelerate's names) still fails the verification; and
the refusal of ``latest`` says the fix of a fixable cause, never to start afresh for it.

The oracle of the resume is an uninterrupted run of the same scenario (deterministic):
the resumed run's losses after the checkpoint are the uninterrupted run's.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from small_run import copy_of, small_trainer, step_lr, warnings_of

from melissa_trainer import (
    CheckpointError,
    Hook,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
)
from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(180)

#: what the hook writes into each checkpoint
ARTEFACTS = ["artefacts/card.txt", "model_card.json", "my_model.pt"]


class ExportArtefact(Hook):
    """An HF-style `on_save`: a copy of the weights and a model card into `path`."""

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        if trainer.is_main_process:
            torch.save(trainer.model.state_dict(), Path(path) / "my_model.pt")
            (Path(path) / "model_card.json").write_text(json.dumps({"step": state.global_step}))
            (Path(path) / "artefacts").mkdir()
            (Path(path) / "artefacts" / "card.txt").write_text("a card")


class Losses(Hook):
    """Each step's logged loss, by step."""

    def __init__(self) -> None:
        self.losses: dict[int, float] = {}

    def on_log(
        self, trainer: Any, state: TrainerState, control: TrainerControl, logs: dict[str, float]
    ) -> None:
        self.losses[state.global_step] = logs["loss"]


def run(out: Path, max_steps: int, resume: str | None = None, lr: float = 1e-2) -> OnlineTrainer:
    """The small run (small_run.py) trained: Adam at `lr`, a StepLR(7, 0.7), every
    step logged, the last 2 checkpoints kept, the hooks."""
    trainer = small_trainer(
        out,
        max_steps,
        resume,
        optimizer=lambda params: torch.optim.Adam(params, lr=lr, weight_decay=0.0),
        scheduler=step_lr(gamma=0.7),
        hooks=[ExportArtefact(), Losses()],
        logging_steps=1,
        max_to_keep=2,
    ).trainer
    trainer.train()
    return trainer


def losses(trainer: OnlineTrainer) -> dict[int, float]:
    hook = trainer.hooks.get(Losses)
    assert hook is not None
    return hook.losses


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    return losses(run(tmp_path_factory.mktemp("full") / "out", 30))


def test_a_hooks_artefacts_in_the_checkpoint_do_not_stop_the_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, uninterrupted: dict[int, float]
) -> None:
    out = tmp_path / "out"
    run(out, 20)
    root = out / "checkpoints"
    for step in (10, 20):  # the artefacts are in every checkpoint, not in its manifest
        assert all((root / f"checkpoint-{step}" / a).is_file() for a in ARTEFACTS)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        resumed = run(out, 30, resume="latest")
    # resumed from checkpoint-20 (the newest), exactly: the uninterrupted run's losses
    assert resumed.state.global_step == 30 and sorted(losses(resumed)) == list(range(21, 31))
    assert losses(resumed) == {s: v for s, v in uninterrupted.items() if s > 20}
    # one warning, naming the files and the fix
    said = [w for w in warnings_of(caplog) if "not in its manifest" in w]
    assert len(said) == 1, warnings_of(caplog)
    assert all(a in said[0] for a in ARTEFACTS), said[0]
    assert "checkpoint-20" in said[0] and "beside the checkpoints" in said[0]
    assert not [w for w in warnings_of(caplog) if "does not verify" in w]
    # rotation treats such a checkpoint as any other: the last 2 kept, artefacts and all
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["checkpoint-20", "checkpoint-30"]


def test_every_file_of_a_checkpoint_has_a_name_the_trainer_owns(tmp_path: Path) -> None:
    """`manifest.OWN_NAMES` is in step with what a checkpoint holds: otherwise a file
    of the trainer's that the manifest lacks would pass for a hook's."""
    run(tmp_path / "out", 10)
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-10"
    entries = manifest.read(checkpoint)
    assert entries is not None
    names = {rel.split("/", 1)[0] for rel in entries}
    assert {n for n in names if not manifest.OWN_NAMES.fullmatch(n)} == set()
    assert not [a for a in ARTEFACTS if manifest.OWN_NAMES.fullmatch(a.split("/", 1)[0])]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """checkpoint-10 and checkpoint-20 of a run (copied by the tests that change them)."""
    out = tmp_path_factory.mktemp("written") / "out"
    run(out, 20)
    return out


def test_a_file_where_the_trainer_reads_its_own_still_fails(written: Path, tmp_path: Path) -> None:
    checkpoint = written / "checkpoints" / "checkpoint-20"
    entries = manifest.read(checkpoint)
    assert entries is not None
    for stray in ("rank_0/stray.bin", "rank_7/buffer.json", "optimizer_1.bin", "pytorch_model.bin"):
        out = copy_of(written, tmp_path / stray.replace("/", "-"))
        copied = out / "checkpoints" / "checkpoint-20"
        (copied / stray).parent.mkdir(exist_ok=True)
        (copied / stray).write_bytes(b"x")
        found = manifest.unexpected(copied, entries)
        own = [p for p in found if not p.foreign]
        assert [str(p) for p in own] == [
            f"{stray}: unexpected: not in the manifest, where the trainer's own files are"
        ], found


def test_an_empty_rank_folder_fails_too_and_latest_takes_the_one_before(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An empty ``rank_7/`` counts a rank for the loading (it took checkpoint-20 for a
    checkpoint of more ranks and failed on a missing rank_1/source.json: htrial8 F2);
    the verification now names it and ``latest`` resumes from checkpoint-10."""
    out = copy_of(written, tmp_path)
    checkpoint = out / "checkpoints" / "checkpoint-20"
    (checkpoint / "rank_7").mkdir()
    entries = manifest.read(checkpoint)
    assert entries is not None
    own = [str(p) for p in manifest.unexpected(checkpoint, entries) if not p.foreign]
    assert own == ["rank_7/: unexpected folder: not in the manifest, where the trainer's own are"]
    with caplog.at_level(logging.INFO, logger="melissa_trainer"):
        resumed = run(out, 30, resume="latest")
    assert resumed.state.global_step == 30
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed from")]
    assert said == [f"resumed from {out / 'checkpoints' / 'checkpoint-10'} at step 10"], said


def test_the_refusal_says_the_fix_and_no_fresh_start_for_a_fixable_cause(
    written: Path, tmp_path: Path
) -> None:
    out = copy_of(written, tmp_path)
    for step in (10, 20):
        (out / "checkpoints" / f"checkpoint-{step}" / "rank_0" / "stray.bin").write_bytes(b"x")
    with pytest.raises(CheckpointError) as refused:
        run(out, 30, resume="latest")
    message = str(refused.value)
    assert "move the files not in the manifest out of the checkpoints" in message, message
    assert "start afresh" not in message and "move them aside" not in message, message


def test_the_refusal_of_damaged_checkpoints_says_so_and_how_to_give_up(
    written: Path, tmp_path: Path
) -> None:
    out = copy_of(written, tmp_path)
    for step in (10, 20):
        optimizer = out / "checkpoints" / f"checkpoint-{step}" / "optimizer.bin"
        os.truncate(optimizer, optimizer.stat().st_size // 2)
    with pytest.raises(CheckpointError) as refused:
        run(out, 30, resume="latest")
    message = str(refused.value)
    assert "a file missing or changed is damaged" in message, message
    assert "start afresh" in message, message
    assert "to resume:" not in message, message


def test_a_checkpoint_named_by_its_path_with_artefacts_is_resumed(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = copy_of(written, tmp_path)
    checkpoint = out / "checkpoints" / "checkpoint-10"
    with caplog.at_level(logging.WARNING):
        resumed = run(out, 20, resume=str(checkpoint))
    assert resumed.state.global_step == 20 and sorted(losses(resumed)) == list(range(11, 21))
    said = [w for w in warnings_of(caplog) if "not in its manifest" in w]
    assert len(said) == 1 and "checkpoint-10" in said[0], warnings_of(caplog)
