"""The checkpoints of a run that a resume does not continue, moved out of its way.

A resume from a named checkpoint older than others in the same folder (a roll-back
past a diverged loss, a bad save) starts another history from it. Left beside it, the
later checkpoints of the history not continued stood in the new run's way three times:
its save of a step they hold replaced theirs; `max_to_keep` counted them, so it deleted
the new run's own checkpoints first (they are lower steps: a user trial kept the stale
checkpoint-120 and -160 and deleted the new run's 100 and 105); and a requeued job's
``latest`` took the newest by step, theirs, silently dropping the new run's work. A
warning asked the user to move them aside; now the resume does so itself
(`set_aside_later`): one rename per checkpoint into a sibling folder, nothing read,
changed or deleted. Main rank only, before anything is written. So does a resume from
``latest`` past newer checkpoints that do not verify (`trainer.resume_choice.
resolve_resume`): skipped for a fault that may pass (permission bits, a shared file
system's unreadable file), they were deleted by the new run's rotation, or taken by a
later ``latest`` over the new run's checkpoints (tests/checkpoint/test_skipped_set_aside.py).
A resume from a checkpoint of another folder (another output_dir, a copy) continues
none of `root`'s: all of them are moved aside, for the same three reasons (seen: its
rotation deleted the new run's checkpoint-15 and kept the other run's 30, which the next
``latest`` took; tests/checkpoint/test_resume_other_folder.py).
A resume from one of `root`'s checkpoints moves aside those of `root` of another training
(`set_aside_others`: another history, `checkpoint.history`; copied in from another
output_dir), whatever their steps: this run's rotation would delete them, or its saves
replace them (tests/checkpoint/test_foreign_checkpoint.py).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from melissa_trainer.checkpoint.files import fsync_dir
from melissa_trainer.checkpoint.history import foreign, history_of
from melissa_trainer.checkpoint.paths import free_sibling
from melissa_trainer.common.checkpoint_names import list_checkpoints

__all__ = ["set_aside_later", "set_aside_others"]

logger = logging.getLogger(__name__)


def set_aside_later(
    path: Path, root: Path, now: float | None = None, said: bool = True
) -> Path | None:
    """Move the checkpoints of `root` of later steps than `path` (the one a resume
    names) into a new sibling folder ``{root}-after-{path.name}-YYYYmmddTHHMMSSZ`` and
    return it, saying so in one warning (unless not `said`: the caller's warnings name
    the folder, ``latest``'s skipped checkpoints); when `path` is not one of `root`'s
    (another folder's), every checkpoint of `root`, into ``{root}-previous-...`` (as
    `overwrite_output_dir` names it). None (nothing moved) when there are none. Renames
    that fail (permissions, another file system) are logged and leave the rest where
    they are, with the advice to move them by hand: the resume goes on."""
    found = list_checkpoints(root)  # by step
    resolved = [p.resolve() for p in found]
    if path.resolve() in resolved:
        later = found[resolved.index(path.resolve()) + 1 :]
        what, named, which = f"after-{path.name}", path.name, "later checkpoints"
    else:  # another folder's: none of these is of the history it continues
        later, what, named, which = found, "previous", str(path), "checkpoints"
    if not later:
        return None
    target = free_sibling(root, what, now)
    names = ", ".join(p.name for p in later)
    if (exc := _move(later, root, target)) is not None:
        left = [p.name for p in later if p.exists()]
        logger.warning(
            "resuming from %s, but %s holds %s of a run this one does not "
            "continue (%s), and moving them to %s failed (%s): %s are still there, where "
            "this run's saves of their steps replace them, max_to_keep counts them, and "
            "'latest' would take the newest by step; move them aside by hand",
            named, root, which, names, target, exc, ", ".join(left),
        )  # fmt: skip
        return None
    if not said:
        return target
    logger.warning(
        "resuming from %s: the %s of a run this one does not continue "
        "(%s) were moved to %s, so that this run's saves, max_to_keep and "
        "--resume_from_checkpoint latest see this run's checkpoints only",
        named, which, names, target,
    )  # fmt: skip
    return target


def set_aside_others(path: Path, root: Path, now: float | None = None) -> Path | None:
    """Move the checkpoints of `root` of another training than `path` (one of `root`'s,
    the one a resume takes: `history.foreign`, unknown histories never) into a new
    sibling folder ``{root}-other-YYYYmmddTHHMMSSZ`` and return it, saying so in one
    warning. None (nothing moved) when there are none, or when `path` is not one of
    `root`'s (`set_aside_later` moves them all then). Renames that fail are logged, the
    rest left where they are, as `set_aside_later`'s: the resume goes on."""
    found = list_checkpoints(root)
    if path.resolve() not in [p.resolve() for p in found]:
        return None
    mine = history_of(path)
    theirs = [p for p in found if foreign(p, mine) is not None]
    if not theirs:
        return None
    target = free_sibling(root, "other", now)
    names = ", ".join(f"{p.name} (history {history_of(p)})" for p in theirs)
    if (exc := _move(theirs, root, target)) is not None:
        left = [p.name for p in theirs if p.exists()]
        logger.warning(
            "resuming from %s (history %s), but %s holds checkpoints of another training "
            "(%s), and moving them to %s failed (%s): %s are still there, where this run's "
            "rotation deletes them and its saves of their steps replace them; move them "
            "aside by hand",
            path.name, mine, root, names, target, exc, ", ".join(left),
        )  # fmt: skip
        return None
    logger.warning(
        "resuming from %s (history %s): the checkpoints of another training in %s (%s: "
        "copied in from another output_dir?) were moved to %s, so that this run's "
        "rotation and saves leave them alone",
        path.name, mine, root, names, target,
    )  # fmt: skip
    return target


def _move(checkpoints: list[Path], root: Path, target: Path) -> OSError | None:
    """Move `checkpoints` (of `root`) into the new folder `target`, durably (both
    folders fsynced); the error that stopped it, if any (those moved stay moved)."""
    try:
        target.mkdir()
        for checkpoint in checkpoints:
            os.rename(checkpoint, target / checkpoint.name)
        fsync_dir(target)
        fsync_dir(root)
    except OSError as exc:
        return exc
    return None
