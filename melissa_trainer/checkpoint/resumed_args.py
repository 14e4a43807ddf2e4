"""What a resume says of the settings changed since its checkpoint was written.

A checkpoint keeps the `TrainingArguments` of the run that wrote it
(``training_args.json``); the resumed run's arguments win (docs/resume.md). A setting
changed on the way (another ``batch_size``, ``gradient_accumulation_steps``, ``buffer``,
``seed``...) is allowed, but the resumed run is then not the one the checkpoint's
would have been, so the resume names each change once, as Hugging Face's Trainer does
for its batch size and steps: a warning on the main rank, before training goes on.

The optimizer's hyperparameters (``lr``, ``weight_decay``, ``betas``... of each
``param_groups`` entry) are no `TrainingArguments`: the script builds the optimizer,
and the resume replaces what it built with the checkpoint's (`load_state_dict`), as
Hugging Face's Trainer does, silently there. The resume names each value that differs
(`changed_hyperparameters`), in the same way: the checkpoint's apply. So with the
learning-rate scheduler's settings (``step_size``, ``gamma``, ``T_max``... of its
``state_dict``, `scheduler_settings`), which its `load_state_dict` replaces likewise:
both are named in one warning (`built`, `changes`, `warn_changed_hyperparameters`).

Pure but for the warnings; reads nothing but what it is given.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from melissa_trainer.checkpoint.errors import CheckpointError, not_this_run

__all__ = [
    "IGNORED",
    "NOT_APPLIED",
    "Built",
    "built",
    "changed_hyperparameters",
    "changed_settings",
    "changes",
    "check_same_optimizer",
    "hyperparameters",
    "missing_hyperparameters",
    "scheduler_settings",
    "warn_changed_hyperparameters",
    "warn_changed_settings",
]

logger = logging.getLogger(__name__)

#: settings that say where a run writes and how it shows itself, how often it logs and
#: saves, or how it starts: not what it trains (the same steps, batches and weights: a
#: log reads the figures, a save copies the state, and `stage_batches` and DDP's
#: `ddp_find_unused_parameters` do the same arithmetic), so a change of theirs is no
#: change of the run; and `max_steps`, which a resume is made to change (train longer:
#: the documented way to go on; a checkpoint at or past the new limit has its own
#: warning, `registry`). `eval_steps` is not one: validations drive early stopping.
IGNORED = frozenset(
    {
        "max_steps",
        "output_dir",
        "logging_dir",
        "resume_from_checkpoint",
        "overwrite_output_dir",
        "disable_progress_bar",
        "report_to",
        "logging_steps",
        "save_steps",
        "save_seconds",
        "save_at_end",
        "max_to_keep",
        "on_save_error",
        "stage_batches",
        "ddp_find_unused_parameters",
    }
)


def changed_settings(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``"name old -> new"`` for each setting of `current` whose value differs from
    `saved`'s (the checkpoint's ``training_args.json``), in `current`'s order; a setting
    the checkpoint lacks (written by an earlier version) and the `IGNORED` ones are left
    out. Values compare as the JSON holds them (a tuple as a list)."""
    changes = []
    for name, value in current.items():
        if name in IGNORED or name not in saved:
            continue
        now = list(value) if isinstance(value, tuple) else value
        if saved[name] != now:
            changes.append(f"{name} {saved[name]!r} -> {now!r}")
    return changes


#: settings a resume does not apply: `seed` seeds the RNGs (torch, numpy, random) and each
#: buffer's generator (``seed + rank``) at the start, and the resume then restores the
#: checkpoint's states of all of them (or, on another number of ranks, seeds them from
#: the checkpoint's: `reshard.reshard_seed`), so another seed draws nothing differently
#: (as in Hugging Face's Trainer, whose RNG states load after its `set_seed`)
NOT_APPLIED = frozenset({"seed"})


def warn_changed_settings(path: Path, saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Log one warning naming every `changed_settings` of the resume from checkpoint
    `path`, or nothing when there is none: those that apply, then those that do not
    (`NOT_APPLIED`), each group said for what it is. (A warning: shown with no logging
    set up, which a user's script rarely has.)"""
    changes = changed_settings(saved, current)
    if not changes:
        return
    unused = [c for c in changes if c.split(" ", 1)[0] in NOT_APPLIED]
    applied = [c for c in changes if c not in unused]
    said = []
    if applied:
        said.append(
            f"{', '.join(applied)}. This run's settings apply: the run goes on, but it is "
            "not the run that checkpoint's would have been (resume with the same settings "
            "to continue it exactly)"
        )
    if unused:
        said.append(
            f"{', '.join(unused)}, which has no effect on a resume: the checkpoint's random "
            "states are restored (every rank's torch, numpy and random generators, each "
            "buffer's; on another number of ranks each rank's are derived from the "
            "checkpoint's, not from the seed), so the run draws as it would have with the "
            "checkpoint's seed (to draw otherwise, start a new run with that seed)"
        )
    logger.warning(
        "resuming from %s with settings changed since it was written: %s",
        path,
        "; and ".join(said),
    )


#: a value compared between the built optimizer and the loaded one
_SCALARS = (int, float, bool, str, type(None))


def hyperparameters(param_groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A copy of each group's comparable values: scalars, and tuples or lists of
    scalars (``betas``); not ``params``, nor tensors or callables (which cannot be
    compared as numbers). Take it before the load: the load changes the groups in place."""
    copies = []
    for group in param_groups:
        kept: dict[str, Any] = {}
        for key, value in group.items():
            if key != "params" and _comparable(value):
                kept[key] = tuple(value) if isinstance(value, list) else value
        copies.append(kept)
    return copies


def _comparable(value: Any) -> bool:
    """A scalar, or a tuple or list of scalars: compared as numbers (or strings)."""
    return isinstance(value, _SCALARS) or (
        isinstance(value, tuple | list) and all(isinstance(v, _SCALARS) for v in value)
    )


def changed_hyperparameters(
    built: Sequence[Mapping[str, Any]], loaded: Sequence[Mapping[str, Any]]
) -> list[str]:
    """``"param_groups[i].key built -> loaded"`` for each value of `hyperparameters`
    that the load changed. A group's ``lr`` that a scheduler drives (the group has the
    scheduler's ``initial_lr``) moved with training: its ``initial_lr`` (what was built)
    is compared instead; the values a cyclic scheduler drives (``momentum``, ``betas``
    when the group has ``max_momentum``) are left out likewise."""
    changes = []
    for index, (mine, theirs) in enumerate(zip(built, hyperparameters(loaded), strict=False)):
        driven = {"lr"} if "initial_lr" in mine else set()
        if "max_momentum" in mine:
            driven |= {"momentum", "betas"}
        for key, value in mine.items():
            if key in driven or key not in theirs or theirs[key] == value:
                continue
            changes.append(f"param_groups[{index}].{key} {value!r} -> {theirs[key]!r}")
    return changes


def missing_hyperparameters(
    built: Sequence[Mapping[str, Any]], loaded: Sequence[Mapping[str, Any]]
) -> list[str]:
    """``"param_groups[i].key"`` for each of `built`'s `hyperparameters` that the loaded
    group lacks: the checkpoint holds another optimizer's state (an SGD's groups have no
    ``betas``, an Adam's no ``momentum``), which `load_state_dict` takes without a word
    and the first step fails on (``KeyError: 'betas'``). Keys a newer torch added are no
    such case: each optimizer's ``__setstate__``, which the load calls, sets them."""
    return [
        f"param_groups[{index}].{key}"
        for index, (mine, theirs) in enumerate(zip(built, loaded, strict=False))
        for key in mine
        if key not in theirs
    ]


#: a scheduler's `state_dict` values that move with training (``T_cur``, the restarts'
#: ``T_i``, the plateau's ``best``...), or copy the optimizer's ``initial_lr`` (``base_lrs``,
#: compared as the param groups'): no setting of the script's
_MOVING = frozenset(
    {"last_epoch", "base_lrs", "T_cur", "T_i", "best", "num_bad_epochs", "cooldown_counter"}
)


def scheduler_settings(state: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The settings in a learning-rate scheduler's `state_dict`: its public values that
    `_comparable` keeps (lists as tuples), but those that move with training
    (`_MOVING`); a `SequentialLR`'s or `ChainedScheduler`'s inner schedulers' as
    ``_schedulers[i].key``, and its ``_milestones``. Private values (``_last_lr``,
    ``_step_count``...) are the scheduler's progress, not settings."""
    kept: dict[str, Any] = {}
    for key, value in state.items():
        if key == "_schedulers" and isinstance(value, list):
            for index, inner in enumerate(value):
                if isinstance(inner, Mapping):
                    kept.update(scheduler_settings(inner, f"{prefix}_schedulers[{index}]."))
            continue
        setting = key == "_milestones" or not key.startswith("_")
        if setting and key not in _MOVING and _comparable(value):
            kept[prefix + key] = tuple(value) if isinstance(value, list) else value
    return kept


#: what the script built, taken before the load: the param groups' `hyperparameters`,
#: and the scheduler's class name and `scheduler_settings` (None without a scheduler)
Built = tuple[list[dict[str, Any]], tuple[str, dict[str, Any]] | None]


def built(param_groups: Sequence[Mapping[str, Any]], scheduler: Any | None) -> Built:
    """The optimizer's and the scheduler's values as the script built them. Take it
    before the load: the load changes both in place."""
    settings = None
    if scheduler is not None:
        settings = (type(scheduler).__name__, scheduler_settings(scheduler.state_dict()))
    return hyperparameters(param_groups), settings


def changes(
    before: Built, param_groups: Sequence[Mapping[str, Any]], scheduler: Any | None
) -> list[str]:
    """`changed_hyperparameters`, then ``"Scheduler.key built -> loaded"`` for each of
    the scheduler's settings of `before` that the load changed."""
    found = changed_hyperparameters(before[0], param_groups)
    if before[1] is not None and scheduler is not None:
        name, mine = before[1]
        theirs = scheduler_settings(scheduler.state_dict())
        found += [
            f"{name}.{key} {value!r} -> {theirs[key]!r}"
            for key, value in mine.items()
            if key in theirs and theirs[key] != value
        ]
    return found


def warn_changed_hyperparameters(path: Path, changes: Sequence[str]) -> None:
    """Log one warning naming the `changes` of the resume from `path` (the optimizer's
    hyperparameters and the scheduler's settings), what applies (the checkpoint's) and
    how to change them, or nothing."""
    if changes:
        logger.warning(
            "resuming from %s: the optimizer's hyperparameters or the scheduler's settings "
            "your script built differ from the checkpoint's, which apply (the optimizer "
            "and its scheduler are restored): %s. To train on with other values, see "
            'docs/resume.md, "Optimizer hyperparameters on resume"',
            path,
            ", ".join(changes),
        )


def check_same_optimizer(optimizer: Any, path: Path, built: list[dict[str, Any]]) -> None:
    """Raise `CheckpointError` (``optimizer.bin``) when `optimizer`'s param groups, as
    loaded from `path`, lack hyperparameters of those the script `built`
    (`missing_hyperparameters`): another optimizer's state, which the first step would
    fail on (a bare KeyError)."""
    missing = missing_hyperparameters(built, optimizer.param_groups)
    if missing:
        inner = getattr(optimizer, "optimizer", optimizer)  # (Accelerate wraps it)
        kind = type(inner).__name__
        raise CheckpointError(
            f"cannot load {path / 'optimizer.bin'}: it holds the state of another optimizer "
            f"than your {kind} ({', '.join(missing)} missing): {not_this_run(path)}",
            path,
            "optimizer.bin",
        )
