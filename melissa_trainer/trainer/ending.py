"""The end of `OnlineTrainer.train()`: what every rank does, at the same step, once the
loop is over (`Event`'s docstring: LOOP_END, the last action point, PREEMPTED,
TRAIN_END), and the `Preempted` raised after it when a signal stopped the run.

Runs on the training thread, once per `train()`; collective (the actions and the
preemption checkpoint are).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.common.refusal import SaidOnRankZero
from melissa_trainer.core.loss_guard import NonFiniteLossError
from melissa_trainer.core.view import TrainerView
from melissa_trainer.hooks import Event
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.launch_restarts import with_no_restart
from melissa_trainer.trainer import end_save
from melissa_trainer.trainer.late_end import deciding
from melissa_trainer.trainer.no_training import refuse_untrained
from melissa_trainer.trainer.preempted import Preempted
from melissa_trainer.trainer.rank_failure import write_note
from melissa_trainer.trainer.resume_words import failure_words
from melissa_trainer.trainer.save_failure import EndKind, at_end
from melissa_trainer.trainer.stop_cause import StopCause

__all__ = [
    "EndingTrainer",
    "end_training",
    "keeps_training",
    "save_at_failure",
    "source_failed",
]

logger = logging.getLogger(__name__)


class EndingTrainer(TrainerView, Protocol):
    """What the end of training uses of the trainer: its view, and its save."""

    def save_checkpoint(self) -> Path | None: ...


def end_training(
    trainer: EndingTrainer,
    signum: int,
    perform_actions: Callable[[], None],
    decide: Callable[[str], None],
) -> None:
    """After the loop (the last window's losses checked, `preempted_by` set): LOOP_END,
    the final log, validation and save that hooks request there (`perform_actions`, the
    trainer's action point), the source stopped, TRAIN_END. The source is told why first
    (`Source.note_stop`): ``end``, or ``preempted`` with the cause's words, closed under
    torchrun with no restart left by the words that no restart follows
    (`launch_restarts.with_no_restart`: a person or a scheduler's requeue resumes it).

    The final log's rates are of the training since the last log: the time LOOP_END's
    hooks take (a study's wait for its last simulations' exits, `Study.on_loop_end`) is
    left out of them.

    `signum` (0: none) is the preemption the ranks agreed on, its cause's code
    (`StopCause.code`: a signal, or the launcher's death): a checkpoint of this step is
    then written whatever the hooks asked (one of this step that exists already is
    rewritten when it lacks what came since: `_end_checkpoint`), and `Preempted` raised
    after TRAIN_END; its
    WARNING comes once the hooks' `on_loop_end` and the action point are done, as the
    checkpoint is written ("writing a checkpoint"), or says it was written there. A
    request made after the last action point is logged, never dropped silently.

    Without a signal, with `save_at_end`, a checkpoint of this step that lacks what came
    since it was written or loaded (`end_save.checkpoint_current`) is rewritten too. A
    failed save there raises `FinalCheckpointSaveError` on every rank, whatever
    `on_save_error` (nothing is left to train on; `save_failure`); a preemption's
    failed save under ``on_save_error="continue"`` is said as the end's, and `Preempted`
    names the step a resume starts from.

    A stream that ended at step 0 raises `no_training.NoTrainingError` first, on every
    rank: nothing of the end runs (no checkpoint of an untrained model).

    `decide` is told where the end's checkpoint stands once the action point is over,
    or an exception ends it (`late_end.deciding`): what a late signal's line says.
    """
    refuse_untrained(trainer, signum)  # (collective: every rank agreed on the end)
    state, control, hooks = trainer.state, trainer.control, trainer.hooks
    cause = StopCause.of(signum)  # ("SIGTERM", or "the launcher (..., pid N) is gone")
    figures, started = trainer.log_figures, time.perf_counter()
    counted_from = figures.started
    hooks.fire(Event.LOOP_END, trainer, state, control)
    if figures.started == counted_from:  # (unless a hook called `trainer.log()` there)
        figures.started += time.perf_counter() - started  # (not training time)
    saved_step = state.last_save_step == state.global_step  # (the same on every rank)
    # (the save_at_end hook skips a step saved already: it may lack what came since;
    # `checkpoint_current` is collective, reached alike on every rank)
    if not signum and trainer.args.save_at_end and saved_step:
        current = end_save.checkpoint_current(trainer)  # (never short-circuited)
        if not current:  # (decided alike on every rank: no agreement needed)
            control.request_alike("should_save")
    saves = end_save.saves(trainer)
    end: EndKind = "preemption" if signum else "end"
    # (`decide`: where the end's checkpoint stands, as a late signal's line says it once
    # decided, alike on every rank: `late_end`)
    with deciding(trainer, decide), at_end(trainer, end):  # (a failed save raises, but
        perform_actions()  # for a preemption's: `save_failure`)
    saved = False  # (whether this step's checkpoint holds the state now)
    if signum:
        step = state.global_step
        written, words = _end_checkpoint(trainer, saves)
        logger.warning(
            "%s: rank %d stopped at step %d, as every rank; %s",
            cause,
            trainer.process_index,
            step,
            words,
        )
        with at_end(trainer, "preemption"):  # (collective: every rank agreed on signum)
            saved = written or trainer.save_checkpoint() is not None
        hooks.fire(Event.PREEMPTED, trainer, state, control)
    # (why, for the simulations that close as it stops: a stream's stop record; a
    # preemption on torchrun's last attempt says no restart follows, as every record
    # that promises a resume does: `launch_restarts.with_no_restart`)
    said = trainer.ended_by or "ended"
    trainer.source.note_stop(*(("preempted", with_no_restart(said)) if signum else ("end", said)))
    trainer.source.stop()  # before the end hooks: no simulation runs while they do
    hooks.fire(Event.TRAIN_END, trainer, state, control)
    requested = control.pending()
    if requested:  # no action point is left to honour them: say so, never drop silently
        logger.warning(
            "a hook set %s after the last action point (in on_preempted or "
            "on_train_end, or in the events of the final log, validation or save): "
            "ignored; request them in on_loop_end",
            " and ".join(requested),
        )
    if signum:
        path = ckpt.checkpoint_path(trainer.checkpoint_root, state.global_step)
        assert cause is not None
        # (not saved: its save failed, on_save_error="continue"; `resume_from` then names
        # the last checkpoint, maybe this step's, written before what came since)
        preempted = Preempted(
            cause.signum,
            state.global_step,
            str(path) if saved else None,
            cause,
            resume_from=None if saved else state.last_save_step or None,
        )
        if trainer.is_main_process:
            logger.warning("%s", preempted)  # uncaught, a SystemExit prints nothing
        raise preempted


def _end_checkpoint(trainer: EndingTrainer, saves: int) -> tuple[bool, str]:
    """At a preemption's end: whether this step's checkpoint holds the run's state (no
    save needed), and the words of the WARNING for it. Written by this end's action
    point (`saves`: `end_save.saves` before it): yes. Otherwise a checkpoint of this step
    (a periodic save's, or the one the run resumed from) holds it only when nothing it
    holds changed since (`end_save.checkpoint_current`, collective): samples received,
    simulations ended since then make it rewritten, replaced atomically."""
    state = trainer.state
    step = state.global_step
    if end_save.saves(trainer) > saves and state.last_save_step == step:
        return True, "its checkpoint is written"
    if end_save.checkpoint_current(trainer):
        return True, f"its checkpoint {_name(trainer, step)} holds this state already"
    if state.last_save_step == step:
        return False, (
            f"rewriting its checkpoint {_name(trainer, step)}, which lacks what came since "
            "it was written (samples received, simulations ended)"
        )
    return False, "writing a checkpoint"


def _name(trainer: TrainerView, step: int) -> str:
    return ckpt.checkpoint_path(trainer.checkpoint_root, step).name


class _SaidSourceError(SourceError, SaidOnRankZero):
    """A `SourceError` whose whole story is its message (a study that failed, a stream
    that stalled: no `__cause__`), raised by `train()` once its log line said it:
    uncaught, it ends the program with exit code 1 and no traceback through the
    trainer's and the dataset's internals; ``except SourceError`` (and ``except
    Exception``) still catch it."""


_SaidSourceError.__name__ = _SaidSourceError.__qualname__ = "SourceError"  # (as printed)


def keeps_training(error: SourceError) -> bool:
    """Whether the training is kept when a source fails with `error`: a checkpoint of
    the step it stopped at is written (`save_at_failure`). Only when the message says it
    all (a study that failed, a stream that stalled): not with a `__cause__` (a failure in
    the user's code, in the receiver's thread...), whose traceback is the user's to read,
    nor for an error another rank said already (`SaidOnRankZero`)."""
    return error.__cause__ is None and not isinstance(error, SaidOnRankZero)


def source_failed(
    trainer: EndingTrainer,
    error: SourceError,
    check_losses: Callable[[], None] = lambda: None,
    together: bool = False,
    also: str = "",
) -> SourceError:
    """What `train()` raises when its source failed with `error`: when the training is
    kept (`keeps_training`), an ERROR line at the step training stopped, naming the
    checkpoint to resume from and what a resume does (`failure_words`, with
    `error.resume_note`, the source's words: a study's), and a quiet copy of `error`
    (`_SaidSourceError`); otherwise `error` itself, whose traceback is the user's to
    read. Either way, under several ranks, `error` is noted for the others
    (`rank_failure.write_note`).

    Only the data failed, not the model: when it is kept, a checkpoint of the step
    training stopped at is written (`save_at_failure`), as a preemption does, so that the
    training since the last periodic save is kept, once `check_losses` (the loss guard's
    check of the last window) passed: by a single process, or by every rank together
    when they agreed on the failure (`together`: `source_failure`); the exit status
    stays 1. `also`: a preemption agreed with the failure, in words, said in the line
    before what a resume does (`source_failure.SourceFailure.at_agreement`)."""
    write_note(trainer, error)  # (for the other ranks)
    trainer.source.note_stop(
        "error", f"training stopped at step {trainer.state.global_step}: {error}"
    )
    if not keeps_training(error):
        return error
    written, why = save_at_failure(trainer, check_losses, together)
    how = (f"{also}; " if also else "") + failure_words(trainer, written, why, error.resume_note)
    sep = "\n" if "\n" in str(error) else "; "  # (after a study's report: a line of its own)
    logger.error("training stopped at step %d: %s%s%s", trainer.state.global_step, error, sep, how)
    quiet = _SaidSourceError(*error.args)
    quiet.code = 1  # (SystemExit's: the exit status)
    return quiet


def save_at_failure(
    trainer: EndingTrainer, check_losses: Callable[[], None] = lambda: None, together: bool = False
) -> tuple[Path | None, str]:
    """The checkpoint of the step at which a source failed (this step's, written now or
    by the loop), or None and why not. Written only after some training: the loop stops
    at a window's start when its source fails (it waits for data only in
    `StreamDataset.prefetch`), so model, optimizer and pending batches are those of a
    step, as at a preemption. Under several ranks, only when `together`: the ranks
    agreed on the failure (`source_failure`, through the `core.stop_sync` agreement, as
    a preemption's) and every rank calls this at the same step (collective: the checks
    and the save); otherwise the failure reached each rank at a step of its own (raised
    elsewhere than in a read of data, or an agreement that broke), and none is written.
    Nor when `check_losses` raises (a non-finite loss since the last check: no
    checkpoint holds one). A failed save is logged, never raised: the source's error is
    the one to raise."""
    state = trainer.state
    if trainer.num_processes > 1 and not together:
        return None, "the ranks could not agree on a step to save at"
    if state.global_step == 0:
        return None, "nothing trained yet"
    if state.last_save_step == state.global_step and end_save.checkpoint_current(trainer):
        return ckpt.checkpoint_path(trainer.checkpoint_root, state.global_step), ""
    try:
        check_losses()
    except NonFiniteLossError as exc:
        logger.error("%s", exc)
        return None, "a loss since the last check is not finite, see above"
    try:
        with at_end(trainer, "failure"):  # (a failed save raises: said as the end's)
            written = trainer.save_checkpoint()
    except Exception as exc:  # (`FinalCheckpointSaveError`, a hook's: the source's error wins)
        logger.error("the checkpoint at the failure could not be written: %s", exc)
        return None, "its save failed, see above"
    return written, "" if written is not None else "its save failed, see above"
