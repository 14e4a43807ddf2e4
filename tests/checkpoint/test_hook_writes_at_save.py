"""What a hook's `on_save` does to the checkpoint just written is said at the save, not
first at a resume: files it adds (Hugging Face callbacks' habit) are warned of once per
run, naming the hooks and where to write them instead; a file of the trainer's it
overwrites, removes or adds (the checkpoint would no longer verify) is a
`CheckpointError` at that save, naming the file, the hooks and the fix; a file
rewritten with the same bytes is no change."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from small_run import small_trainer, warnings_of

from melissa_trainer import (
    CheckpointError,
    Hook,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
)
from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(180)


class OnSave(Hook):
    """Calls `write(checkpoint)` in each `on_save`."""

    def __init__(self, write: Callable[[Path], None]) -> None:
        self.write = write

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self.write(Path(path))


def artefacts(path: Path) -> None:
    (path / "model_card.json").write_text("{}")
    (path / "exports").mkdir()
    (path / "exports" / "weights.pt").write_bytes(b"weights")


def run(out: Path, hook: Hook, max_steps: int = 30, resume: str | None = None) -> OnlineTrainer:
    """The small run (small_run.py) trained: SGD at 1e-2, no scheduler, the progress
    bar shown, `hook` after the built-in ones."""
    trainer = small_trainer(
        out, max_steps, resume, hooks=[hook], disable_progress_bar=False
    ).trainer
    trainer.train()
    return trainer


def test_files_a_hook_adds_are_warned_of_once_at_the_save(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(tmp_path / "out", OnSave(artefacts))  # saves at steps 10, 20, 30
    said = warnings_of(caplog, "manifest does not list")
    assert len(said) == 1, said
    message = said[0]
    assert "checkpoint-10" in message and "exports/weights.pt, model_card.json" in message
    assert "OnSave" in message and "not part of the verified state" in message, message
    assert "beside the checkpoint" in message and "artefacts/checkpoint-STEP" in message
    # and the resume of such a checkpoint goes on (its own warning: test_foreign_files)
    caplog.clear()
    resumed = run(tmp_path / "out", OnSave(lambda path: None), 40, resume="latest")
    assert resumed.state.global_step == 40


def overwrite_model(path: Path) -> None:
    """A hook that exports the weights under the trainer's own name (other bytes)."""
    model = path / "model.safetensors"
    model.write_bytes(model.read_bytes() + b" ")


def remove_trainer_state(path: Path) -> None:
    (path / "trainer_state.json").unlink()


def add_an_own_name(path: Path) -> None:
    (path / "pytorch_model.bin").write_bytes(b"x")


def add_an_empty_rank_folder(path: Path) -> None:
    """An empty ``rank_7/``: the loading counts the ranks by these folders (htrial8 F2:
    the save said nothing, the resume took it for a checkpoint of more ranks)."""
    (path / "rank_7").mkdir()


@pytest.mark.parametrize(
    "write, said",
    [
        (overwrite_model, "model.safetensors: overwritten"),
        (remove_trainer_state, "trainer_state.json: removed"),
        (add_an_own_name, "pytorch_model.bin: unexpected"),
        (add_an_empty_rank_folder, "rank_7/: unexpected folder"),
    ],
)
def test_a_hook_that_changes_the_trainers_files_fails_the_save_naming_it(
    tmp_path: Path, write: Callable[[Path], None], said: str
) -> None:
    with pytest.raises(CheckpointError) as failed:
        run(tmp_path / "out", OnSave(write))
    message = str(failed.value)
    assert "checkpoint-10" in message and said in message, message
    assert "in order: OnSave" in message, message  # the user's hooks that ran (not ours)
    assert "beside the checkpoint" in message and "no longer verifies" in message, message
    assert failed.value.path == tmp_path / "out" / "checkpoints" / "checkpoint-10"
    # the first save raised: the run stopped there, its checkpoint kept as it is
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "out" / "checkpoints")] == [
        "checkpoint-10"
    ]


def test_a_file_rewritten_with_the_same_bytes_is_no_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def rewrite(path: Path) -> None:
        model = path / "model.safetensors"
        data = model.read_bytes()
        model.unlink()  # (a new inode: its stamp changed for sure)
        model.write_bytes(data)

    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        trainer = run(tmp_path / "out", OnSave(rewrite))
    assert trainer.state.global_step == 30
    assert warnings_of(caplog, "manifest") == []
