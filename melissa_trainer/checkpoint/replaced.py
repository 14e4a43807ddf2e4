"""A checkpoint left aside by a replacement that a crash interrupted, put back.

`paths.commit` replaces an existing ``checkpoint-STEP`` (a preemption's rewrite of the
step a run resumed from) in one atomic exchange where the system can. Where it cannot
(``renameat2(RENAME_EXCHANGE)`` refused: NFS and other shared file systems, which
checkpoints of clusters live on) the old one is first renamed to ``checkpoint-STEP.old``
(`paths._aside`), then the new one renamed in. A crash between the two renames left no
``checkpoint-STEP``: ``latest`` took an older checkpoint, or, with ``max_to_keep=1``,
none at all, and the run started afresh (every step and simulation trained again), the
complete checkpoint still on disk under a name no resume looks at.

`restore_replaced` puts such a checkpoint back under its name before a resume lists the
checkpoints. The one put back is the checkpoint as it was before the interrupted save, a
complete one (it had been committed); the new one, in the staging directory, may not be
(the crash may have come at any point of its save) and is left for the next save of its
step to remove (`paths.begin`). The resume verifies what it takes as for any checkpoint.

A ``.old`` is put back only while its step's staging is there. A ``.old`` that a
completed replacement could not remove stays aside; a later save of its step that finds
no ``checkpoint-STEP`` (rotation removed it: a fresh save, nothing to replace) renames
it out of reach first (`begin_save`, `retire_stale`): else that save's crash left a
staging beside it and the resume put the stale one back as the step's checkpoint.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from melissa_trainer.checkpoint import paths
from melissa_trainer.checkpoint.files import fsync_dir
from melissa_trainer.checkpoint.paths import STAGING_PREFIX, checkpoint_path
from melissa_trainer.common.checkpoint_names import PREFIX

__all__ = ["begin_save", "restore_replaced", "retire_stale", "to_restore"]

logger = logging.getLogger(__name__)

#: ``checkpoint-STEP.old`` or ``checkpoint-STEP.old-N`` (`paths._aside`: N when an
#: earlier ``.old`` could not be removed; the highest N is the one set aside last)
_ASIDE = re.compile(rf"^({re.escape(PREFIX)}\d+)\.old(?:-(\d+))?$")


def restore_replaced(root: str | os.PathLike[str]) -> list[Path]:
    """Rename each ``checkpoint-STEP.old[-N]`` under `root` whose ``checkpoint-STEP`` is
    missing while ``.tmp-checkpoint-STEP`` is there (the replacement interrupted) back
    to ``checkpoint-STEP`` (the one set aside last, when there are several), said in a
    WARNING; returns the checkpoints restored. Main rank only,
    before the checkpoints are listed. A rename that fails is logged (the resume goes
    on without that checkpoint, as before) and the rest are still tried."""
    restored = []
    for aside, final in to_restore(root):
        try:
            os.rename(aside, final)
            fsync_dir(root)
        except OSError as exc:
            logger.warning(
                "%s is missing and %s, the checkpoint a save of its step was replacing "
                "when it was interrupted, could not be put back (%s): rename it by hand "
                "to resume from it",
                final, aside, exc,
            )  # fmt: skip
            continue
        logger.warning(
            "%s: put back from %s, where a save of its step that was interrupted "
            "(a crash between its two renames) had left it",
            final, aside.name,
        )  # fmt: skip
        restored.append(final)
    return restored


def to_restore(root: str | os.PathLike[str]) -> list[tuple[Path, Path]]:
    """What `restore_replaced` would put back under `root` now: (the ``.old`` aside, the
    ``checkpoint-STEP`` it becomes), by name; looks only."""
    root = Path(root)
    if not root.is_dir():
        return []
    latest: dict[str, tuple[int, Path]] = {}
    for path in root.iterdir():
        match = _ASIDE.match(path.name)
        if match is None or not path.is_dir():
            continue
        name, index = match.group(1), int(match.group(2) or 0)
        if name not in latest or index > latest[name][0]:
            latest[name] = (index, path)
    found = []
    for name, (_, aside) in sorted(latest.items()):
        final = root / name
        # Put back only where the new one is still staged: a replacement that completed
        # left no staging (a .old it could not remove, its permissions, stays aside
        # even once rotation removed its step: no resume takes such a one back)
        staged = root / f"{STAGING_PREFIX}{name.removeprefix(PREFIX)}"
        if not final.exists() and staged.is_dir():
            found.append((aside, final))
    return found


def retire_stale(root: Path, step: int) -> None:
    """Before a save of `step` under `root` that replaces nothing (no ``checkpoint-STEP``),
    rename each ``checkpoint-STEP.old[-N]`` (stale: no replacement of it is under way) to
    ``stale-checkpoint-STEP.old[-N]``, which `restore_replaced` never puts back, said in a
    WARNING. Main rank only. A rename that fails is logged: the save goes on."""
    name = f"{PREFIX}{step}"
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        match = _ASIDE.match(path.name)
        if match is None or match.group(1) != name:
            continue
        target = path.with_name(f"stale-{path.name}")
        try:
            os.rename(path, target)
        except OSError as exc:
            logger.warning("could not rename %s out of a resume's way (%s)", path, exc)
            continue
        logger.warning(
            "%s, left by an earlier replacement of %s, renamed %s: a save of that step "
            "begins with none to replace, and a resume after its crash must not take "
            "the stale one back",
            path, name, target.name,
        )  # fmt: skip


def begin_save(root: str | os.PathLike[str], step: int) -> Path:
    """`paths.begin` of a save of `step` under `root`, a stale ``checkpoint-STEP.old``
    renamed first when there is no ``checkpoint-STEP`` to replace (`retire_stale`).
    Main rank only."""
    if not checkpoint_path(root, step).exists():
        retire_stale(Path(root), step)
    return paths.begin(root, step)  # (looked up at the call: a test may replace it)
