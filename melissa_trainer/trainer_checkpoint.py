"""What an `OnlineTrainer` checkpoint holds, written and read on every rank.

The part of `OnlineTrainer` that `save_checkpoint` and `load_checkpoint` delegate to
(split out of trainer.py for its size; it reads the trainer's figures since the last
log, which are part of a checkpoint). The directory mechanics (staging, fsync, atomic rename,
rotation) are `melissa_trainer.checkpoint`'s; the layout is in its module docstring.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.numpy import load_file, save_file

from melissa_trainer import checkpoint as ckpt
from melissa_trainer import simulation_loss
from melissa_trainer.hooks import Event

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer import OnlineTrainer

logger = logging.getLogger(__name__)

#: per-rank trainer figures in each checkpoint's rank_R/: this rank's `samples_seen`
#: and its loss since the last log (`LogFigures.rank_state`)
RANK_STATE = "trainer_rank.json"


def save_checkpoint(trainer: OnlineTrainer) -> Path:
    """See `OnlineTrainer.save_checkpoint`. Collective."""
    acc, state = trainer.accelerator, trainer.state
    # every sample trained on up to this step, counted over ranks (otherwise at the next log)
    counts = torch.tensor(
        [trainer._figures.take_untotaled()], dtype=torch.float64, device=acc.device
    )
    if trainer.stop_sync.distributed:
        torch.distributed.all_reduce(counts)
    state.total_samples_seen += int(counts.item())
    state.last_save_step = state.global_step  # the checkpoint records its own step
    root = trainer.checkpoint_root
    if acc.is_main_process:
        ckpt.begin(root, state.global_step)
    acc.wait_for_everyone()
    staging = ckpt.staging_path(root, state.global_step)
    acc.save_state(str(staging), safe_serialization=True)
    rank_dir = ckpt.rank_path(staging, acc.process_index)
    trainer.buffer.save(rank_dir)
    trainer.dataset.save(rank_dir)
    ckpt.write_json(rank_dir / "source.json", trainer.source.state_dict())
    rank_state = {"samples_seen": state.samples_seen, **trainer._figures.rank_state()}
    ckpt.write_json(rank_dir / RANK_STATE, rank_state)
    losses = trainer.simulation_losses.state_dict()
    save_file(losses, str(rank_dir / simulation_loss.STATE_FILE))
    if acc.is_main_process:
        (staging / "trainer_state.json").write_text(state.to_json())
        ckpt.write_json(staging / "hooks.json", trainer.hooks.state_dict())
        ckpt.write_json(staging / "training_args.json", trainer.args.to_dict())
    acc.wait_for_everyone()  # every rank's files are written
    ckpt.fsync_rank_files(staging, acc.process_index, acc.num_processes)
    acc.wait_for_everyone()
    final = ckpt.checkpoint_path(root, state.global_step)
    if acc.is_main_process:
        ckpt.commit(staging, final)
        removed = ckpt.rotate(root, trainer.args.max_to_keep)
        logger.info("saved %s (removed %s)", final, [p.name for p in removed])
    acc.wait_for_everyone()
    trainer.hooks.fire(Event.SAVE, trainer, state, trainer.control, str(final))
    return final


def load_checkpoint(trainer: OnlineTrainer, path: Path) -> None:
    """See `OnlineTrainer.load_checkpoint`."""
    ranks = ckpt.count_ranks(path)
    if ranks != trainer.num_processes:
        raise ValueError(
            f"checkpoint {path} was written by {ranks} training ranks but this run has "
            f"{trainer.num_processes}: resume with --num_processes {ranks}"
        )
    state = trainer.state
    rank_dir = ckpt.rank_path(path, trainer.process_index)
    # The source first: a study resumed with settings it cannot follow is refused
    # before anything else of the checkpoint is loaded (docs/resume.md).
    trainer.source.load_state_dict(ckpt.read_json(rank_dir / "source.json"))
    trainer.accelerator.load_state(str(path))
    state.load_state_dict(ckpt.read_json(path / "trainer_state.json"))
    state.max_steps = trainer.args.max_steps  # the new run's limit wins
    trainer.hooks.load_state_dict(ckpt.read_json(path / "hooks.json"))
    trainer.buffer.load(rank_dir)
    trainer.dataset.load(rank_dir)
    if (rank_dir / RANK_STATE).is_file():  # absent from checkpoints of earlier versions
        mine = ckpt.read_json(rank_dir / RANK_STATE)
        state.samples_seen = int(mine["samples_seen"])
        trainer._figures.load_rank_state(mine)
    else:
        trainer._figures.restart()
    losses = rank_dir / simulation_loss.STATE_FILE
    if losses.is_file():
        trainer.simulation_losses.load_state_dict(load_file(str(losses)))
    elif trainer._loss_steps:  # a checkpoint of an earlier version
        logger.warning(
            "%s has no per-simulation losses (written by an earlier version): the "
            "simulations trained on before it are not observed by the sampler",
            path,
        )
    logger.info("resumed from %s at step %d", path, state.global_step)


def window_left(trainer: OnlineTrainer) -> int:
    """The steps left in the stop-sync window that a restored checkpoint was written
    in: the fewest whole steps pending on any rank (every rank took the window's
    batches when it began, the agreed number of steps being the fewest). Resuming
    with them keeps the windows, hence the data taken from the buffer at each step
    and the logged buffer figures, where they were without the restart. Collective.
    """
    steps = trainer.dataset.num_pending // trainer.args.gradient_accumulation_steps
    if trainer.stop_sync.distributed:
        fewest = torch.tensor([steps], dtype=torch.int64, device=trainer.accelerator.device)
        torch.distributed.all_reduce(fewest, op=torch.distributed.ReduceOp.MIN)
        steps = int(fewest.item())
    return steps
