"""Hooks: the extension mechanism, and the built-in features written with it."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

from melissa_trainer.config.argument_checks import early_stopping_warning
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.hooks.base import HookList
from melissa_trainer.hooks.early_stopping import EarlyStoppingHook
from melissa_trainer.hooks.events import Event
from melissa_trainer.hooks.flow import FlowHook
from melissa_trainer.hooks.hook import Hook
from melissa_trainer.hooks.lineage import SampleLedger
from melissa_trainer.hooks.loss_tracker import SimulationLossTracker
from melissa_trainer.hooks.progress import ProgressHook
from melissa_trainer.hooks.pseudo_epochs import PseudoEpochHook
from melissa_trainer.hooks.serving import ServingHook
from melissa_trainer.hooks.tensorboard import TensorBoardHook
from melissa_trainer.hooks.wall_clock import WallClockBudget, budget_factor

__all__ = [
    "EarlyStoppingHook",
    "Event",
    "FlowHook",
    "Hook",
    "HookList",
    "ProgressHook",
    "PseudoEpochHook",
    "SampleLedger",
    "ServingHook",
    "SimulationLossTracker",
    "TensorBoardHook",
    "WallClockBudget",
    "budget_factor",
    "default_hooks",
    "trainer_hooks",
]


def trainer_hooks(
    args: TrainingArguments,
    *,
    has_eval: bool,
    source_hooks: Sequence[Hook],
    user_hooks: Iterable[Hook] | None,
    use_default_hooks: bool,
) -> list[Hook]:
    """Every hook of a trainer, in the order they are called: the source's (what it
    needs: a study's lifecycle, an adaptive study's loss tracker and feed), then a
    `SimulationLossTracker` when ``simulation_loss_steps > 0`` and neither the source
    nor the user gives one (whatever `use_default_hooks`: the arguments ask for the
    statistic), then `default_hooks` with `use_default_hooks`, then the user's
    (`user_hooks`: an iterable of `Hook` instances, or None for none)."""
    user = user_hook_list(user_hooks)
    given = [*source_hooks, *user]
    hooks: list[Hook] = list(source_hooks)
    steps = args.simulation_loss_steps
    if steps and not any(isinstance(h, SimulationLossTracker) for h in given):
        hooks.append(SimulationLossTracker(steps))
    if use_default_hooks:
        hooks += default_hooks(args, has_eval)
    return [*hooks, *user]


def user_hook_list(user_hooks: Iterable[Hook] | None) -> list[Hook]:
    """`OnlineTrainer`'s `hooks` argument as a list: None is none (transformers'
    ``callbacks=None``). One hook, or a hook class, where the iterable belongs is a
    `TypeError` naming the fix; iterating them would say only ``'MyHook' object is not
    iterable`` (the items themselves are checked by `HookList.add`)."""
    if user_hooks is None:
        return []
    if isinstance(user_hooks, type) and issubclass(user_hooks, Hook):
        return [user_hooks]  # type: ignore[list-item]  # HookList.add: "pass MyHook()"
    if isinstance(user_hooks, Hook):
        name = type(user_hooks).__name__
        raise TypeError(
            f"hooks takes a list of hooks, got one hook ({name}): pass hooks=[{name}()]"
        )
    return list(user_hooks)


def default_hooks(args: TrainingArguments, has_eval: bool) -> list[Hook]:
    """The built-in hooks that `args` asks for, in the order they are called.

    The cadence (`FlowHook`: logs every `logging_steps`, validation every `eval_steps`
    and at the end when there is an eval dataset, checkpoints every `save_steps`, every
    `save_seconds` and with `save_at_end`) always; console logs and the progress bar (the
    bar only on the main process, unless `disable_progress_bar`); TensorBoard when
    `report_to="tensorboard"`; early stopping when `early_stopping_patience` is set
    (with a UserWarning without `eval_steps`: `argument_checks.early_stopping_warning`);
    pseudo-epochs when `pseudo_epochs > 1`.

    Raises:
        ValueError: `eval_steps` or `early_stopping_patience` set without an eval
            dataset (`has_eval` false): they would do nothing, silently (a user's
            ``--eval_steps 5`` trained without one validation), so the trainer refuses
            before anything starts, as Hugging Face's does for its evaluation strategy.
    """
    if not has_eval:
        asked = {
            name: value
            for name, value in (
                ("eval_steps", args.eval_steps),
                ("early_stopping_patience", args.early_stopping_patience),
            )
            if value is not None
        }
        if asked:
            # the hint names each refused field and its flag (a config file's key too)
            raise ValueError(
                f"{' and '.join(f'{k}={v}' for k, v in asked.items())} asks for validation, "
                "but the trainer has no eval_dataset: pass OnlineTrainer(..., "
                f"eval_dataset=...), or leave {' and '.join(asked)} unset "
                f"({', '.join(f'--{k} none' for k in asked)} on the command line)"
            )
    hooks: list[Hook] = [
        FlowHook(
            args.logging_steps,
            eval_steps=args.eval_steps if has_eval else None,
            save_steps=args.save_steps,
            validate_at_end=has_eval,
            save_at_end=args.save_at_end,
            save_seconds=args.save_seconds,
        ),
        ProgressHook(disable_bar=args.disable_progress_bar),
    ]
    if args.report_to == "tensorboard":
        hooks.append(TensorBoardHook(args.resolved_logging_dir))
    if args.early_stopping_patience is not None:
        said = early_stopping_warning(vars(args))  # (where the hook is made: its premise)
        if said is not None:
            warnings.warn(said, UserWarning, stacklevel=2)
        hooks.append(EarlyStoppingHook(args.early_stopping_patience))
    if args.pseudo_epochs > 1:
        hooks.append(PseudoEpochHook(args.pseudo_epochs))
    return hooks
