"""Which folders under a checkpoint root are complete checkpoints, and the newest of
them: the one implementation that every layer reads (`checkpoint.paths` re-exports it
and owns the rest of the layout; the ledger checker, `hooks.lineage_given_up`, which
sits below the `checkpoint` layer, finds the study's record with it).

A complete checkpoint is a directory named ``checkpoint-STEP`` (STEP its step, decimal
digits); a checkpoint being written (``.tmp-checkpoint-STEP``, renamed once every rank
has written it), an old one being deleted (``.deleting-checkpoint-STEP``) and a file of
a checkpoint's name are none. Standard library only (the `common` layer's rule).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["PREFIX", "latest_checkpoint", "list_checkpoints"]

#: a complete checkpoint's folder name, before its step
PREFIX = "checkpoint-"
_NAME = re.compile(rf"^{PREFIX}(\d+)$")


def list_checkpoints(root: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints under `root`, oldest (lowest step) first; none when `root`
    is not a directory."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = _NAME.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under `root` (the highest step), or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None
