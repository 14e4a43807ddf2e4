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
not watched).

A preemption's stop (SIGTERM, SIGINT, the launcher's death) that finds the directory
gone at its save writes no checkpoint, and exits with status 1, not the preemption's
128 + signum: a job script that requeues a preempted run on that status would requeue a
run whose checkpoints are gone (a resume from ``latest`` then starts afresh, or takes
the checkpoints of the trainer that made the directory again). Its ERROR paragraph says
so, and what such a run would resume from (`preempted_words`).

Under several ranks rank 0 leaves no failure note (`rank_failure.write_note` would make
the directory again, to hold it), and the other ranks, whose next collective breaks as
rank 0 leaves, find their own hook mark gone from the directory (`gone_under`: the file
each rank keeps there from its start, ``.rank-failures/in-hook-N``, holding the run's
id) and raise a quiet copy of `OutputDirLost` (exit status 1, nothing said: rank 0's
paragraph is the one ERROR), rather than saying that rank 0 was killed by a signal
(`rank_failure.RankGone`). Measured with two ranks under ``accelerate launch``
(tests/checkpoint/test_output_dir_removed_ranks.py): before, rank 0's note made
``OUTPUT_DIR/.rank-failures`` again and rank 1 repeated rank 0's paragraph.
"""

from __future__ import annotations

import logging
from pathlib import Path

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.common.setting import setting
from melissa_trainer.trainer.hook_mark import MARK_PREFIX, marked_run
from melissa_trainer.trainer.lock_holder import LOCK_FILE
from melissa_trainer.trainer.output_hold import OutputDirHold
from melissa_trainer.trainer.preempted import exit_code
from melissa_trainer.trainer.stop_cause import StopCause

__all__ = ["OutputDirLost", "check_output_dir", "gone_under", "lost_words", "preempted_words"]

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

    def __init__(self, output_dir: str, what: str, preempted: str = "") -> None:
        super().__init__(lost_words(output_dir, what) + preempted)
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


def preempted_words(cause: StopCause, root: Path) -> str:
    """What a preemption's stop (`cause`) whose checkpoint cannot be written says
    (module docstring): its exit status (1, not the preemption's 128 + signum) and what
    a requeued run resumes from (the latest checkpoint under `root` now, if any)."""
    latest = latest_checkpoint(root)
    found = (
        f"resume from {latest}, whichever trainer wrote it"
        if latest is not None
        else "find no checkpoint there (the run's were removed with it) and start afresh"
    )
    resume = setting("resume_from_checkpoint", "latest")
    return (
        f". The checkpoint that this stop ({cause}) asked for is not written, so this run "
        f"exits with status 1, not {exit_code(cause.signum)} (a preempted run's, which a job "
        f"script requeues): a run of the same command with {resume} would {found}"
    )


def check_output_dir(
    hold: OutputDirHold, stopping: StopCause | None = None, root: Path | None = None
) -> None:
    """Raise `OutputDirLost` (said once at ERROR first) when `hold`'s lock file is gone
    or replaced; nothing on ranks without the lock (`OutputDirHold.lock` None). With a
    preemption's stop asked for (`stopping`: its cause), the error says so
    (`preempted_words`, of the checkpoints under `root`)."""
    lock = hold.lock
    if lock is None:
        return
    what = lock.lost()
    if what is None:
        return
    also = "" if stopping is None or root is None else preempted_words(stopping, root)
    lost = OutputDirLost(hold.output_dir, what, also)
    logger.error("%s", lost)
    raise lost


def gone_under(output_dir: str, notes_dir: str, rank: int, run_id: str) -> bool:
    """Whether `output_dir` was removed (or removed and made again) under this run, as
    a rank other than 0 can tell (module docstring): its hook mark,
    ``output_dir/notes_dir/in-hook-RANK``, is no longer a file of run `run_id`."""
    mark = Path(output_dir) / notes_dir / f"{MARK_PREFIX}{rank}"
    return marked_run(mark) != run_id
