"""The learning-rate scheduler a checkpoint was written with, checked before a resume.

The trainer registers its scheduler with Accelerate (`Accelerator.register_for_checkpointing`):
its ``state_dict`` is saved as ``custom_checkpoint_0.pkl`` and restored by torch's
``load_state_dict``, which is ``__dict__.update``. A scheduler of another class would
take the other's attributes without a word (an ``ExponentialLR`` given ``StepLR``'s
``gamma``: neither schedule), and a scheduler added or removed makes Accelerate refuse
with its count of "registered objects". So each checkpoint records the scheduler's
class (`SCHEDULER_FILE`, `record`; ``null`` without one), and `check` refuses, before
anything is loaded, a resume whose scheduler is of another class, or is present on one
side only, naming both and the fix (docs/resume.md, "Another scheduler on resume").

A checkpoint written before the record: whether it holds a scheduler is read from
``custom_checkpoint_0.pkl``; its class is not known, so only the names of its settings
(`scheduler_settings`) are compared with the built scheduler's: names that differ are
refused (the load would mix two schedules); the same names, nothing is said.

Pure but for the files `record` writes and `check` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from melissa_trainer.checkpoint.files import read_json, write_json
from melissa_trainer.checkpoint.resumed_args import scheduler_settings
from melissa_trainer.config.reading import ConfigError

__all__ = ["SCHEDULER_FILE", "STATE_FILE", "check", "class_name", "record"]

#: the scheduler's class, at a checkpoint's root: ``{"class": "module.Name"}`` or null
SCHEDULER_FILE = "lr_scheduler.json"
#: where Accelerate keeps the state of the trainer's only registered object
STATE_FILE = "custom_checkpoint_0.pkl"
#: the docs' section on changing or replacing the scheduler
_DOCS = 'docs/resume.md, "Another scheduler on resume"'
#: settings that some torch versions have and others not (``verbose``)
_VERSIONED = frozenset({"verbose"})


def class_name(scheduler: Any | None) -> str | None:
    """``module.QualName`` of `scheduler`'s class; None for no scheduler."""
    if scheduler is None:
        return None
    cls = type(scheduler)
    return f"{cls.__module__}.{cls.__qualname__}"


def record(path: Path, scheduler: Any | None, registered: Mapping[str, Any] | None = None) -> None:
    """Write `SCHEDULER_FILE` into checkpoint (staging) directory `path`: the scheduler's
    class, and the record of the objects `registered` with Accelerate
    (`registered_objects.recorded`; None: not recorded)."""
    record: dict[str, Any] = {"class": class_name(scheduler)}
    record.update(registered or {})
    write_json(path / SCHEDULER_FILE, record)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def check(path: Path, scheduler: Any | None) -> None:
    """Refuse a resume from checkpoint `path` with `scheduler` (the run's, None: none)
    when the checkpoint's scheduler is of another class or present on one side only.

    Raises:
        ConfigError: naming both sides and the fix (a ValueError, as the checkpoints'
            other refusals of a run built otherwise: `reshard`).
    """
    file = path / SCHEDULER_FILE
    mine = class_name(scheduler)
    if file.is_file():
        theirs: str | None = read_json(file).get("class")
        has_state = theirs is not None
    else:  # written before the record: only the presence of its state is known
        theirs, has_state = None, (path / STATE_FILE).is_file()
    if has_state and scheduler is None:
        what = (
            f"a learning-rate scheduler ({_short(theirs)})"
            if theirs
            else (f"a learning-rate scheduler's state ({STATE_FILE})")
        )
        raise ConfigError(
            f"{path} was written with {what} and this run has none: pass the run's "
            f"scheduler again (OnlineTrainer(model, args, optimizer, lr_scheduler)) to "
            f"resume; to train on without it, see {_DOCS}"
        )
    if not has_state and scheduler is not None:
        raise ConfigError(
            f"{path} was written without a learning-rate scheduler and this run has one "
            f"({_short(mine or '')}): build none to resume; to train on with one, see {_DOCS}"
        )
    if scheduler is None or not has_state:
        return
    if theirs is not None:
        if theirs != mine:
            raise ConfigError(
                f"{path} was written with the scheduler {_short(theirs)} ({theirs}) and "
                f"this run built {_short(mine or '')} ({mine}): torch's load_state_dict "
                f"would give the {_short(mine or '')} the {_short(theirs)}'s attributes "
                f"(neither schedule). Build a {_short(theirs)} to resume (its settings "
                f"apply); to train on under {_short(mine or '')}, see {_DOCS}"
            )
        return
    _compare_names(path, scheduler)


def _compare_names(path: Path, scheduler: Any) -> None:
    """A checkpoint without the record: refuse when its scheduler's setting names are
    not the built one's (what can be told without its class)."""
    from accelerate.utils import load as accelerate_load

    state = accelerate_load(path / STATE_FILE, weights_only=False)
    if not isinstance(state, dict):
        return  # (not a torch scheduler's: Accelerate's own load says what it finds)
    saved = set(scheduler_settings(state)) - _VERSIONED
    built = set(scheduler_settings(scheduler.state_dict())) - _VERSIONED
    if saved == built:
        return
    name = type(scheduler).__name__
    extra, missing = sorted(saved - built), sorted(built - saved)
    parts = [f"settings your {name} has not ({', '.join(extra)})"] if extra else []
    parts += [f"none of your {name}'s ({', '.join(missing)})"] if missing else []
    raise ConfigError(
        f"{path} holds a learning-rate scheduler's state with {' and '.join(parts)}: its "
        f"scheduler was not the {name} built (the checkpoint, written before its class "
        f"was recorded, does not name it), and torch's load_state_dict would mix the two. "
        f"Build the scheduler the run that wrote it had to resume; to train on under "
        f"{name}, see {_DOCS}"
    )
