"""Hooks: the extension mechanism, and the built-in features written with it."""

from __future__ import annotations

from melissa_trainer.arguments import TrainingArguments
from melissa_trainer.hooks.base import Event, Hook, HookList
from melissa_trainer.hooks.checkpointing import CheckpointHook
from melissa_trainer.hooks.early_stopping import EarlyStoppingHook
from melissa_trainer.hooks.progress import ProgressHook
from melissa_trainer.hooks.pseudo_epochs import PseudoEpochHook
from melissa_trainer.hooks.tensorboard import TensorBoardHook
from melissa_trainer.hooks.validation import ValidationHook

__all__ = [
    "CheckpointHook",
    "EarlyStoppingHook",
    "Event",
    "Hook",
    "HookList",
    "ProgressHook",
    "PseudoEpochHook",
    "TensorBoardHook",
    "ValidationHook",
    "default_hooks",
]


def default_hooks(args: TrainingArguments, has_eval: bool) -> list[Hook]:
    """The built-in hooks that `args` asks for, in the order they are called.

    Console logs and the progress bar always (the bar only on the main process, unless
    `disable_progress_bar`); TensorBoard when `report_to="tensorboard"`; validation when
    there is an eval dataset; early stopping when `early_stopping_patience` is set;
    checkpoints; pseudo-epochs when `pseudo_epochs > 1`.
    """
    hooks: list[Hook] = [ProgressHook(args.logging_steps, disable_bar=args.disable_progress_bar)]
    if args.report_to == "tensorboard":
        hooks.append(TensorBoardHook(args.resolved_logging_dir))
    if has_eval:
        hooks.append(ValidationHook(args.eval_steps))
    if args.early_stopping_patience is not None:
        hooks.append(
            EarlyStoppingHook(
                patience=args.early_stopping_patience,
                metric=args.metric_for_best_model,
                greater_is_better=args.greater_is_better,
            )
        )
    hooks.append(CheckpointHook(args.save_steps, save_at_end=args.save_at_end))
    if args.pseudo_epochs > 1:
        hooks.append(PseudoEpochHook(args.pseudo_epochs))
    return hooks
