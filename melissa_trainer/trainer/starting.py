"""The start of `OnlineTrainer.train()`, before its first step: the checkpoint resumed
(if any) and the source started, with the run's preemption handler already installed,
so that a SIGTERM or SIGINT there (seconds of a large resume, of a study's launch) is
a preemption as in the loop, not a KeyboardInterrupt's traceback (exit code 1, no word
of how to resume) through whatever was running. The mirror of `ending`.

Runs on the training thread, once per `train()`; collective (the resume is).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.hooks import Event
from melissa_trainer.sources.source import Source
from melissa_trainer.stream.launch_restarts import with_no_restart
from melissa_trainer.stream.read_clock import ReadClock
from melissa_trainer.trainer import resume_choice
from melissa_trainer.trainer.dir_lost import OutputDirLost
from melissa_trainer.trainer.history_check import take_history
from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark
from melissa_trainer.trainer.lock_holder import OutputDirLocked
from melissa_trainer.trainer.preemption import PreemptionHandler
from melissa_trainer.trainer.rank_failure import NOTES_DIR, lost_a_peer, write_note
from melissa_trainer.trainer.schedule_end import check_schedule

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = [
    "forced_stop",
    "mark_hooks",
    "note_start_failure",
    "refuse_second_train",
    "setup_failed",
    "start_training",
]


def forced_stop(trainer: OnlineTrainer, preemption: PreemptionHandler | None = None) -> None:
    """What a forced exit does before it exits (a second signal, a launcher gone for
    good: `PreemptionHandler.on_force`, from a helper thread): the source told
    ``preempted``, then stopped (its simulations killed). ``preempted``, not the
    ``stopped`` a receiver says when told nothing: no checkpoint is written at this
    stop, so a solver must not take the stop record's receipts as final and exit
    (`client.stopped`): the run resumed from the latest checkpoint lacks its last steps,
    and a solver that waits for it follows it and sends them again (as after a raw
    `KeyboardInterrupt`: `failing.failed`).

    The record's message starts with the stop's cause as a normal stop's does
    (`StopCause.stopped`, `preemption`'s first request: "stopped by SIGTERM", "stopped
    because the launcher (accelerate launch, pid N) is gone"), then says the forced
    exit; without a cause (none recorded, no handler) it says the forced exit alone.
    Under torchrun with no restart left it closes with the words that no restart
    follows (`launch_restarts.with_no_restart`), as the stop on a peer gone with no note
    does: the resume it promises is a person's (or a scheduler's requeue) to make."""
    cause = preemption.cause if preemption is not None else None
    forced = (
        f"forced to exit at step {trainer.state.global_step}, with no checkpoint at this "
        f"stop: a run resumed from the latest one takes what it lacks"
    )
    said = forced if cause is None else f"{cause.stopped}, then {forced}"
    # (torchrun's last attempt: no restart follows, as a stop on a peer gone says)
    trainer.source.note_stop("preempted", with_no_restart(said))
    trainer.source.stop()


def setup_failed(source: object, error: BaseException, resumes: bool = True) -> None:
    """The trainer's set-up (its `Accelerator`, the process group a restart forms again,
    anything after it in `OnlineTrainer.__init__`: the output directory's claim) failed
    with `error`, before any `train()`: a `Source` is told, as a failed start tells it
    (`Source.note_start_failed`), with the launch's rank (``RANK``: this process's index
    may not be known yet; 0 without it), and first whether a restart of this command
    resumes (`resumes`: `Source.note_restarts_resume`, which the set-up had not said
    yet). Anything else given as the train source: nothing.

    A refused claim (`OutputDirLocked`: another trainer holds `output_dir`) tells the
    source nothing: the records there are the holder's run's, not this one's, and are
    never rewritten (nor is any explicit rendezvous of this source: the holder may be
    the same command, whose records it names)."""
    if isinstance(error, OutputDirLocked):
        return
    if isinstance(source, Source):
        try:
            rank = int(os.environ.get("RANK", "0"))
        except ValueError:
            return
        source.note_restarts_resume(resumes)
        source.note_start_failed(rank, error)


def refuse_second_train(trainer: OnlineTrainer) -> None:
    """Raise RuntimeError when an earlier `train()` of this trainer started its source
    (it ended, was preempted or failed after the start): a source is started once, its
    stream consumed, so a trainer trains once. Hugging Face's `Trainer.train()` may be
    called again (a notebook cell run again after Ctrl-C); here that call failed deep
    inside with ``IterableSource.start() was called twice``, after loading the latest
    checkpoint again (htrial37). A `train()` that failed before the start (a refused
    resume) leaves the source startable, and may be retried."""
    if not trainer.train_started:
        return
    raise RuntimeError(
        f"train() was called again on an OnlineTrainer that has trained already (its "
        f"last train() ended at step {trainer.state.global_step}): a trainer trains its "
        "stream once, and its source was started by that call. To train on, build a new "
        "OnlineTrainer (a new model, optimizer and source) with "
        "resume_from_checkpoint='latest' (--resume_from_checkpoint latest on the command "
        "line), which continues from the last checkpoint in output_dir"
    )


def start_training(trainer: OnlineTrainer, release: Callable[[], None]) -> PreemptionHandler:
    """Install the preemption handler (stopping the source on a forced exit), resume
    the checkpoint `args.resume_from_checkpoint` names, fire LOAD, check the
    lr_scheduler's length against max_steps (`schedule_end.check_schedule`: a refusal
    raises `ScheduleEnded` before the source starts), start the source
    (its starvation watch's clock, if any, told of the hooks' work: `HookList.work`);
    returns the handler, installed (the caller restores it when training ends).

    On any exception (a refused resume, a failed start): the source is stopped if its
    start was reached (what a partial start launched; one never started is left
    startable, for a retry of `train()`), the handler restored, `release` called (the
    trainer's output directory freed), and the exception raised.
    """
    preemption = PreemptionHandler()
    preemption.on_force = partial(forced_stop, trainer, preemption)  # (its cause, when forced)
    preemption.checkpoints = Path(trainer.checkpoint_root)  # (named as a signal comes)
    preemption.install()
    starting = False
    try:  # a refusal (an earlier run's checkpoints, one that does not verify...)
        resume = resume_choice.resolve_resume(trainer)  # verified, the same on every rank
        if resume is not None:
            trainer.load_checkpoint(resume)
            trainer.hooks.fire(Event.LOAD, trainer, trainer.state, trainer.control, str(resume))
        take_history(trainer, resume)  # (drawn afresh, or the checkpoint's: recorded)
        # a schedule sized in steps against max_steps, its count resumed (`schedule_end`)
        trainer.schedule_end = check_schedule(trainer)
        starting = trainer.train_started = True  # (a second train(): refused)
        trainer.source.start(trainer.buffer, trainer.process_index, trainer.num_processes)
        # the hooks' calls and the actions are the training thread's own work, which a
        # source's starvation watch (a stream's, a study's) publishes: `study.starvation`
        reads = getattr(getattr(trainer.source, "starvation", None), "reads", None)
        trainer.hooks.work = reads if isinstance(reads, ReadClock) else None
        trainer.hooks.marker = mark_hooks(trainer)  # (None: one process)
    except BaseException as exc:
        # train() raises, and no retry follows a started source (`refuse_second_train`):
        # it has ended, and a call after it is one after train() (`after_train`; a hook
        # then fired is not one during train(), `actions`). Before a start, a retry may
        # come: the flag stays as it was (a hook's call in the retry is during train())
        trainer.train_ended = trainer.train_ended or starting
        try:
            if starting:
                trainer.source.stop()
        finally:
            note_start_failure(trainer, exc)  # (for a peer waiting at the sources' barrier)
            # (a restarted attempt that failed here: is another restart coming?)
            trainer.source.note_start_failed(trainer.process_index, exc)
            preemption.restore()
            release()  # ...leaves output_dir free for the next try
        raise
    return preemption


def note_start_failure(trainer: OnlineTrainer, error: BaseException) -> None:
    """Under several ranks, this rank's note of `error` (`rank_failure.write_note`), which
    ended its `train()` before the loop (its resume, its source's start): a peer whose
    start succeeded waits for it at the sources' barrier, which breaks as this rank
    exits, and names it from the note (`RankFailed`: its stop record says ``error``, with
    the restarts torchrun has left). Without the note the peer took it for a rank killed
    by a signal (`RankGone`) and told its clients ``preempted``: a resume promised that,
    on torchrun's last attempt (``--max_restarts`` spent, or 0: a plain launch), never
    comes. Not for a collective's failure because a peer is gone (that peer's, not this
    rank's), a removed output directory (a note would make it again), nor what is no
    `Exception` (a forced exit's)."""
    if not isinstance(error, Exception) or isinstance(error, OutputDirLost):
        return
    if not Path(trainer.args.output_dir).is_dir():  # (removed: `write_note` would remake it)
        return
    if trainer.num_processes > 1 and not lost_a_peer(error):
        write_note(trainer, error)


def mark_hooks(trainer: OnlineTrainer) -> HookMark | None:
    """Under several ranks, this rank's `HookMark` (``OUTPUT_DIR/.rank-failures/in-hook-N``):
    the hook method it is in, read by a peer if this rank dies there; None with one
    process, or when the file cannot be made (said at WARNING: only that word is lost)."""
    if trainer.num_processes <= 1:
        return None
    rank = trainer.process_index
    path = Path(trainer.args.output_dir) / NOTES_DIR / f"{MARK_PREFIX}{rank}"
    try:
        return HookMark(path, str(trainer.run_id))
    except (OSError, ValueError) as exc:
        logger.warning("rank %d cannot keep its hook mark in %s: %s", rank, path, exc)
        return None
