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
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from melissa_trainer.checkpoint.paths import PREFIX, STAGING_PREFIX, fsync_dir

__all__ = ["restore_replaced"]

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
    restored = []
    for name, (_, aside) in sorted(latest.items()):
        final = root / name
        # Put back only where the new one is still staged: a replacement that completed
        # left no staging (a .old it could not remove, its permissions, stays aside
        # even once rotation removed its step: no resume takes such a one back)
        staged = root / f"{STAGING_PREFIX}{name.removeprefix(PREFIX)}"
        if final.exists() or not staged.is_dir():
            continue
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
