"""The training's history (`checkpoint.history`) as the trainer keeps it: drawn at a
fresh start, recorded in the checkpoint folder at a resume, and checked by ``latest``.

Collective where a function says so: the main rank reads and decides, every rank gets
the verdict (`from_main`) and all go on, or all raise, together.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.checkpoint import history
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import CheckpointError
from melissa_trainer.checkpoint.later_runs import set_aside_others
from melissa_trainer.common.refusal import said_once
from melissa_trainer.trainer.rank_reports import from_main
from melissa_trainer.trainer.run_id import new_run_id

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["refuse_foreign_latest", "take_history"]

logger = logging.getLogger("melissa_trainer.trainer.checkpointing")  # (its words)


def take_history(trainer: OnlineTrainer, resumed: Path | None) -> None:
    """Give the run its history once the resume is done: the checkpoint's (loaded with
    its state), or a new one (a fresh start, or a checkpoint of a version before
    histories: the same on every rank, drawn by the main rank). After a resume, the main
    rank records it as the folder's (`history.write_record`), so that ``latest`` takes
    this run's checkpoints, not the folder's earlier ones; a record that cannot be
    written is warned about (this run's first save, which writes it too, fails then).
    Collective when a history is drawn."""
    ours = trainer.state.history
    if ours is None:
        ours = from_main(trainer, new_run_id(), "the start, the training's history")
        trainer.state.history = ours
    if resumed is None or not trainer.is_main_process:
        return
    try:
        history.write_record(trainer.checkpoint_root, ours)
    except OSError as exc:
        logger.warning(
            "resumed from %s, but could not record its training in %s: %s",
            resumed,
            Path(trainer.checkpoint_root) / history.RECORD,
            exc,
        )


def refuse_foreign_latest(trainer: OnlineTrainer, path: Path) -> None:
    """Raise `CheckpointError` (said once) when `path`, the checkpoint ``latest`` would
    take, is of another training than the folder's record says (a checkpoint copied in
    from another output_dir): resuming it would continue another study's model, buffer
    and sample record. The message names the way to take it on purpose and the way to
    continue this folder's. Otherwise the main rank moves the folder's checkpoints of
    other trainings aside (`later_runs.set_aside_others`). Collective."""
    words = None
    if trainer.is_main_process:
        root = Path(trainer.checkpoint_root)
        ours = history.read_record(root)
        theirs = history.foreign(path, ours)
        if theirs is not None:
            own = [p.name for p in ckpt.list_checkpoints(root) if history.history_of(p) == ours]
            words = (
                f"resume_from_checkpoint='latest': the newest checkpoint under {root}, "
                f"{path.name}, is of another training (history {theirs}) than the runs of "
                f"this folder (history {ours}, in {root / history.RECORD}; its checkpoints: "
                f"{', '.join(own) or 'none left'}): one copied in from another output_dir, "
                "or written by a run given this output_dir by mistake. To continue from it "
                f"on purpose, pass --resume_from_checkpoint {path} (this folder's other "
                "checkpoints are then moved aside, nothing deleted); to continue this "
                f"folder's training, move {path.name} out of {root}"
            )
    said = from_main(trainer, words, f"{path.name}'s check, its training")
    if said is not None:
        raise said_once(CheckpointError(said, path, ckpt.TRAINER_STATE_FILE), trainer.process_index)
    if trainer.is_main_process:
        set_aside_others(path, Path(trainer.checkpoint_root))
