"""What a resume says of the settings changed since its checkpoint was written.

A checkpoint keeps the `TrainingArguments` of the run that wrote it
(``training_args.json``); the resumed run's arguments win (docs/resume.md). A setting
changed on the way (another ``batch_size``, ``gradient_accumulation_steps``, ``buffer``,
``seed``...) is allowed, but the resumed run is then not the one the checkpoint's
would have been, so the resume names each change once, as Hugging Face's Trainer does
for its batch size and steps: a warning on the main rank, before training goes on.

Pure but for the warning; reads nothing but the dictionaries it is given.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["IGNORED", "changed_settings", "warn_changed_settings"]

logger = logging.getLogger(__name__)

#: settings that say where a run writes and how it shows itself, or how it starts:
#: not what it trains, so a change of theirs is no change of the run; and `max_steps`,
#: which a resume is made to change (train longer: the documented way to go on; a
#: checkpoint at or past the new limit has its own warning, `registry`)
IGNORED = frozenset(
    {
        "max_steps",
        "output_dir",
        "logging_dir",
        "resume_from_checkpoint",
        "overwrite_output_dir",
        "disable_progress_bar",
        "report_to",
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


def warn_changed_settings(path: Path, saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Log one warning naming every `changed_settings` of the resume from checkpoint
    `path`, or nothing when there is none. (A warning: shown with no logging set up,
    which a user's script rarely has.)"""
    changes = changed_settings(saved, current)
    if changes:
        logger.warning(
            "resuming from %s with settings changed since it was written: %s. This run's "
            "settings apply: the run goes on, but it is not the run that checkpoint's "
            "would have been (resume with the same settings to continue it exactly)",
            path,
            ", ".join(changes),
        )
