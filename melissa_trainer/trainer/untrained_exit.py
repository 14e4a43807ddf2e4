"""A rank whose program fails after its trainer's set-up and before its training: the
user's code between ``OnlineTrainer(...)`` and ``train()`` (a hook refused as it is
added on one rank: ``on_train_begin``, another library's name), or `train()`'s own
checks before its start, raising out of the script.

Its peers, in `train()`, wait for it in their start's collectives (the resume's choice,
the schedule's check: `starting.start_training`), which break as its process ends. No
trainer code sees its error: it left no note (`rank_failure.write_note`) naming it, and
on a torchrun restart (``accelerate launch --max_restarts N``) the peers' rewrite of the
failed attempt's stop records (`stream.restart_failed`: ``error`` with the restarts
left) named their own broken collective (gloo's "Connection closed by peer") in place
of this rank's error. `watch_until_trained`, at the end of the set-up under several
ranks, has an uncaught exception (`sys.excepthook`, called before the process ends,
so before the peers' collectives break) of a trainer that has not started training
(`OnlineTrainer.train_started`) write its note (`starting.note_start_failure`) and tell
its source (`Source.note_start_failed`: on a restart, every rank's record that promises
more than is left says ``error`` with the restarts left, naming this error; the peers'
later rewrite then changes nothing), then the previous hook prints it as before.

An error caught by the script is not noted (the rank goes on); nor a collective's
failure because a peer is gone (that peer's), nor a `KeyboardInterrupt` or `SystemExit`
(`note_start_failure`'s rules). Once a trainer's `train()` has started, its own paths
note its failures (`starting`, `failing.failed`).
"""

from __future__ import annotations

import logging
import sys
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any

from melissa_trainer.trainer.rank_failure import lost_a_peer
from melissa_trainer.trainer.starting import note_start_failure

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["watch_until_trained"]

logger = logging.getLogger(__name__)

#: the trainers of this process built under several ranks (weakly: one dropped is gone)
_WATCHED: weakref.WeakSet[Any] = weakref.WeakSet()
#: the hook in place before the first `watch_until_trained` (called after ours)
_previous: list[Any] = []


def watch_until_trained(trainer: OnlineTrainer) -> None:
    """Under several ranks, note an uncaught exception of this process that ends it
    before `trainer` starts training (module docstring); installs this module's
    `sys.excepthook` once per process, over the one in place. One process: nothing."""
    if trainer.num_processes <= 1:
        return
    _WATCHED.add(trainer)
    if not _previous:
        _previous.append(sys.excepthook)
        sys.excepthook = _uncaught


def _uncaught(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    """`sys.excepthook`: each watched trainer not yet training notes `error`, then the
    previous hook runs (whatever the notes did: a failure of theirs is said at WARNING)."""
    try:
        for trainer in list(_WATCHED):
            if not trainer.train_started:
                _note(trainer, error)
    except Exception as exc:  # (the error's own words must still be printed)
        logger.warning("could not note this rank's failure for its peers: %r", exc)
    finally:
        (_previous[0] if _previous else sys.__excepthook__)(kind, error, traceback)


def _note(trainer: OnlineTrainer, error: BaseException) -> None:
    """`error`, ending this rank before `trainer` trains: its note, and its source told."""
    note_start_failure(trainer, error)  # (its rules: an Exception, not a peer's loss...)
    if isinstance(error, Exception) and not lost_a_peer(error):
        trainer.source.note_start_failed(trainer.process_index, error)
