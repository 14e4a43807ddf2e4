"""What a late stop signal's line says of the end's checkpoint (`EndCheckpoint`):
decided once, alike on every rank, when the end's action point is over, and said then
by a line said before it.

A signal that comes once no stop can be agreed on (`preemption.PreemptionHandler`: in
the last window, or after the loop) is said at once, and its line says where the end's
checkpoint stands. Found in review (hguess2, 2026-12-07): that was read from this
rank's flags as the line was said. Under 2 ranks, a hook's save asked on rank 0 alone
(kept for the ranks' agreement, `TrainerControl.asked`) made rank 0 say nothing of it
while rank 1 said "save_at_end is off: no checkpoint is written at the end", and the
agreement then wrote checkpoint-4 on both ranks
(`tests/trainer/test_late_signal_ranks.py`); and a line said while a save was being
written (its step recorded as the save starts) left that denial out though the save then
failed. Now a line said before the end's action point is over says that the end's
checkpoint is said once decided, and `decide` says it then, in a line of its own:
after the ranks' agreement on the hooks' requests, every save done or failed; or, where
`train()` fails before the end's action point (the last window's loss check, a LOOP_END
hook), as it fails (`train()`'s ``finally``: review hrev9, 2026-12-07, found that line
never said, `tests/checkpoint/test_late_signal_said_at_failure.py`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import CheckpointSaveError

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["PENDING", "EndCheckpoint", "deciding", "end_sentence"]

# (the handler's logger: a late signal's lines are one rank's words of its signal)
logger = logging.getLogger("melissa_trainer.trainer.preemption")

#: what a late line says of the end's checkpoint before it is decided
PENDING = "; where the end's checkpoint stands is said once its save is decided"
#: what a resume takes where the end wrote no checkpoint
_RESUME = "a resume starts from the last one written before, or afresh"


def end_sentence(trainer: TrainerView, error: BaseException | None = None) -> str:
    """Where the end's checkpoint stands once the end's action point is over (the
    ranks' agreement on the hooks' requests performed, every save done or failed: the
    same on every rank), or once `error` ended it or `train()` before it: a checkpoint
    of the last step on disk (`state.last_save_step`, which a failed save puts back),
    naming it; else none, and why: its save failed (`error` a `CheckpointSaveError`),
    `train()` failed first, or nothing asked for one (``save_at_end`` off). With `error`,
    also that `train()` raises it and the signal is not raised again: the late line's
    "exit status 128 + the signal" does not hold (`PreemptionHandler.deliver_late` runs
    only as `train()` returns)."""
    said = _where(trainer, error)
    if error is None:
        return said
    raises = f"train() raises {type(error).__name__}, the signal is not raised again"
    return f"{said}; {raises}: the exit status is the error's"


def _where(trainer: TrainerView, error: BaseException | None) -> str:
    """`end_sentence`'s words of the checkpoint itself."""
    state, step = trainer.state, trainer.state.global_step
    if state.last_save_step == step:
        path = ckpt.checkpoint_path(trainer.checkpoint_root, step)
        return f"a checkpoint of the end is on disk: {path}"
    if isinstance(error, CheckpointSaveError):
        return f"no checkpoint of the end is written, its save failed (the error below): {_RESUME}"
    if error is not None:
        failed = f"train() failed first ({type(error).__name__})"
        return f"no checkpoint of the end is written, {failed}: {_RESUME}"
    off = "" if trainer.args.save_at_end else "save_at_end is off: "
    return f"{off}no checkpoint is written at the end ({_RESUME})"


class EndCheckpoint:
    """A late signal's words of the end's checkpoint: asked by the signal watcher's
    thread (`clause`), decided once by the training thread (`decide`). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided: str | None = None
        self._owed = ""  # (the cause of a line said before the decision; "": none)

    def clause(self, cause: str) -> str:
        """What the late line of `cause` ("SIGTERM") ends with: ``"; SENTENCE"`` once
        decided; before, `PENDING`, the sentence then owed (`decide` says it)."""
        with self._lock:
            if self._decided is None:
                self._owed = self._owed or cause
                return PENDING
            return f"; {self._decided}"

    def decide(self, sentence: str) -> None:
        """The end's checkpoint stands as `sentence` says (`end_sentence`), on every
        rank alike; a late line said before gets it now, in a WARNING of its own. The
        first call counts; the later ones do nothing."""
        with self._lock:
            if self._decided is not None:
                return
            self._decided, owed = sentence, self._owed
        if owed:
            logger.warning("%s (said above): %s", owed, sentence)


@contextmanager
def deciding(trainer: TrainerView, decide: Callable[[str], None]) -> Iterator[None]:
    """Around the end's action point: `decide` where the end's checkpoint stands
    (`end_sentence`) as it is over, or as an exception ends it (then raised on)."""
    try:
        yield
    except BaseException as exc:
        decide(end_sentence(trainer, exc))
        raise
    decide(end_sentence(trainer))
