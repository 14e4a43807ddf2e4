"""What a resume says when its checkpoint leaves nothing to train (main rank, at load).

Two cases, each one WARNING naming the checkpoint and how to train on:

* the checkpoint is at or past the new run's `max_steps` (`warn_nothing_to_train`'s
  first case): a larger ``--max_steps`` while the stream had not ended, else the
  end-of-run advice (`train_on_advice`);
* the checkpoint is of a run whose stream had already ended and no pseudo-epoch is left
  to replay (``pseudo_epoch + 1 >= pseudo_epochs``): the resumed run would stop at once,
  trained nothing, and exit 0 with only an ``end of stream`` line, so that a requeued
  batch job looked like it trained (a user trial, 2026-12-02). It says so before the
  source starts.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.core.train_on import train_on_advice

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import CheckpointParts

__all__ = ["warn_nothing_to_train"]

logger = logging.getLogger(__name__)


def warn_nothing_to_train(trainer: CheckpointParts, path: Path) -> None:
    """Warn when the loaded checkpoint at `path` leaves the new run nothing to train: at
    or past its `max_steps`, or of a run whose stream had ended with no replay left
    (module docstring). A larger `max_steps` trains on only while the stream has not
    ended; after its end the advice is the end-of-run line's (`train_on_advice`)."""
    state, limit = trainer.state, trainer.state.max_steps
    if limit is not None and state.global_step >= limit:
        if state.stream_ended:
            advice = (
                "its stream had ended (a larger --max_steps trains on only through the "
                "pseudo-epochs left); to train on past the stream's end: "
                + train_on_advice(trainer.buffer, state.pseudo_epoch + 1)
            )
        else:
            advice = "resume with a larger --max_steps (or none: until the stream ends)"
        logger.warning(
            "%s is at step %d, at or past max_steps=%d: nothing is left to train; %s",
            path,
            state.global_step,
            limit,
            advice,
        )
        return
    if state.stream_ended and state.pseudo_epoch + 1 >= trainer.args.pseudo_epochs:
        logger.warning(
            "%s is of a run whose stream had already ended (at step %d, pseudo-epoch %d "
            "of %d): this resume trains nothing and ends at once; to train on: %s; or "
            "run a new study in another --output_dir",
            path,
            state.global_step,
            state.pseudo_epoch,
            trainer.args.pseudo_epochs,
            train_on_advice(trainer.buffer, state.pseudo_epoch + 1),
        )
