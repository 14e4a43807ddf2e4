"""Which training a checkpoint belongs to: its history, and the history of a folder.

A training's *history* is 16 hex digits drawn when a run starts afresh
(`TrainerState.history`) and kept by every resume, so every checkpoint of one training
carries the same one (in its ``trainer_state.json``), whatever the rank counts. A
checkpoint folder (`checkpoint_root`) records the history its runs continue in
``history.json`` (`RECORD`): written by the main rank when a run resumes and at each
save, before the checkpoint's rename.

Why: a correctly numbered checkpoint of another training copied into this folder (a
user's ``cp``, two studies given one output_dir) was taken by ``latest`` as this run's
own, and resumed silently: another study's model, buffer and sample record. Now
``latest`` tells them apart (`foreign`): the newest checkpoint of another history than
the folder's is refused, naming the way to take it on purpose (``--resume_from_
checkpoint PATH``); an older one is moved aside with the run's other leftovers
(`checkpoint.later_runs`).

What is unknown never counts as another history: a checkpoint of a version before
histories (no field), a folder without a record (written by such a version), a file
that cannot be read (its verification says what is wrong with it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from melissa_trainer.checkpoint.files import fsync_dir, fsync_file
from melissa_trainer.core.state import STATE_FILE

__all__ = ["RECORD", "foreign", "history_of", "read_record", "write_record"]

#: the history a checkpoint folder's runs continue, in that folder
RECORD = "history.json"


def history_of(checkpoint: str | os.PathLike[str]) -> str | None:
    """The history of `checkpoint` (its ``trainer_state.json``'s), or None: none
    recorded (an earlier version's), or unreadable."""
    return _history_in(Path(checkpoint) / STATE_FILE)


def read_record(root: str | os.PathLike[str]) -> str | None:
    """The history recorded for the checkpoint folder `root`, or None (none, or
    unreadable)."""
    return _history_in(Path(root) / RECORD)


def _history_in(file: Path) -> str | None:
    """The ``history`` string of the JSON object in `file`; None when it has none, or
    the file is missing, unreadable or not such an object."""
    try:
        with open(file) as f:
            value = json.load(f).get("history")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def write_record(root: str | os.PathLike[str], history: str) -> None:
    """Record `history` as the one `root`'s runs continue (creating `root`). Main rank
    only. Atomic and durable (written aside, fsynced, renamed); nothing is written when
    the record already says it (a save does not pay an fsync for nothing).

    Raises:
        OSError: it cannot be written (a save reports it as its own failure).
    """
    root = Path(root)
    if read_record(root) == history:
        return
    root.mkdir(parents=True, exist_ok=True)
    aside = root / f".{RECORD}.tmp"
    with open(aside, "w") as f:
        json.dump({"history": history}, f)
    fsync_file(aside)
    os.replace(aside, root / RECORD)
    fsync_dir(root)


def foreign(checkpoint: str | os.PathLike[str], history: str | None) -> str | None:
    """The history of `checkpoint` when it is known and another than `history` (None:
    unknown, which matches any); else None."""
    theirs = history_of(checkpoint)
    if theirs is None or history is None or theirs == history:
        return None
    return theirs
