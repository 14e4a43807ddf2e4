"""A running trainer whose output directory was removed, or whose lock file was
replaced under it, stops: `check_output_dir`, rank 0's, at each action point that acts.

A user's ``rm -rf outputs`` while a trainer runs (and often a second trainer started
on the same path) leaves the first one writing into a directory that is gone: its
TensorBoard writer's thread died with a traceback at its next write, its study files
could not be written, and its checkpoints would have made the directory again, mixed
with the second trainer's files. The choice: stop, not recreate. What the run wrote
there is gone (its checkpoints among it), so a recreated directory holds no checkpoint
to resume from, and a second trainer may already use the path. So rank 0 looks, at each action
point that acts (a log, validation or save: the trainer's writes there, the end's
included), whether its lock file is still the one it locked (`OutputDirLock.lost`: two
``stat`` calls and a non-blocking ``accept``, tens of microseconds on a loaded host,
only at those steps); when not, it says so once at ERROR (what happened, what is lost,
what to do) and `train()` raises `OutputDirLost`: uncaught, it ends the process with
exit code 1 and no traceback, before TensorBoard's writer or a checkpoint writes there.

A removal between that look and a write is not seen until the next action point (a
writer's thread may then still fail; a user's hook writing between action points is
not watched). Under several ranks the other ranks learn it as any
rank's failure (`rank_failure`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.trainer.lock_holder import LOCK_FILE
from melissa_trainer.trainer.output_lock import OutputDirHold

__all__ = ["OutputDirLost", "check_output_dir", "lost_words"]

logger = logging.getLogger("melissa_trainer.trainer.output_lock")


class OutputDirLost(RuntimeError, SaidOnRankZero):
    """Raised by `train()` on rank 0 when its output directory was removed or its lock
    file replaced (module docstring). Its ERROR line is already logged; uncaught, it
    ends the process with exit code 1 and no traceback; ``except RuntimeError`` (and
    ``except Exception``) catch it.

    Attributes:
        output_dir: the directory.
        what: "removed" (the lock file gone, with its directory or alone) or "replaced".
    """

    def __init__(self, output_dir: str, what: str) -> None:
        super().__init__(lost_words(output_dir, what))
        self.output_dir, self.what = output_dir, what
        self.code = 1  # (SystemExit's: the exit status)


def lost_words(output_dir: str, what: str) -> str:
    """What happened to `output_dir` (`what`: as `OutputDirLost`'s), what is lost, and
    what to do, in plain words."""
    lock = str(Path(output_dir) / LOCK_FILE)
    if what == "removed":
        happened = (
            f"the lock file {lock!r} is gone: output_dir {output_dir!r} was removed (or "
            "emptied) while this trainer ran"
        )
    else:
        happened = (
            f"the lock file {lock!r} is another file: output_dir {output_dir!r} was removed "
            "and made again (by another trainer?) while this trainer ran"
        )
    lost = "what it wrote there (its checkpoints among it) is gone, or no longer its own"
    return (
        f"{happened}: this run stops now, without a last checkpoint (it can no longer "
        f"write there), and {lost}. To train again, start a new run: with another "
        "--output_dir, or on this one once no other trainer uses it (remove an output_dir "
        "only after its trainer has ended)"
    )


def check_output_dir(hold: OutputDirHold) -> None:
    """Raise `OutputDirLost` (said once at ERROR first) when `hold`'s lock file is gone
    or replaced; nothing on ranks without the lock (`OutputDirHold.lock` None)."""
    lock = hold.lock
    if lock is None:
        return
    what = lock.lost()
    if what is None:
        return
    lost = OutputDirLost(hold.output_dir, what)
    logger.error("%s", lost)
    raise lost
