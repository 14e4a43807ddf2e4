"""How `OnlineTrainer.train()` fails: when an error (not a `SourceError`: the user's
`process_sample`, a hook, the loss guard's...) or a `KeyboardInterrupt` propagates out of
it, the source is told why training stops (its stop record's code and words), the error
is noted for the other ranks, and a collective broken by another rank's loss is said as
that rank's (`failed`). A loop that is over ends in `ending`, and so does a source's
own failure (`ending.source_failed`).

Runs on the training thread, once, as the error leaves `train()`.
"""

from __future__ import annotations

import logging

from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.core.view import TrainerView
from melissa_trainer.stream.launch_restarts import with_no_restart
from melissa_trainer.trainer.dir_lost import OutputDirLost, gone_under
from melissa_trainer.trainer.exit_meeting import hold_term
from melissa_trainer.trainer.hook_mark import ALIVE
from melissa_trainer.trainer.preemption import PreemptionHandler
from melissa_trainer.trainer.rank_failure import (
    NOTES_DIR,
    RankFailed,
    RankGone,
    error_line,
    lost_a_peer,
    peer_failure,
    write_note,
)

__all__ = ["failed"]

#: (the end's logger, under which `failed` logged before it left `ending`: the stop's
#: WARNINGs are filtered by that name, tests/trainer/test_final_log_preempted.py's)
logger = logging.getLogger("melissa_trainer.trainer.ending")


def failed(
    trainer: TrainerView,
    error: Exception | KeyboardInterrupt,
    preemption: PreemptionHandler | None = None,
) -> None:
    """Tell the source why training stops when `error` (not a `SourceError`: the user's
    `process_sample`, a hook, the loss guard's `NonFiniteLossError`...) propagates out of
    `train()`: ``error`` and one line naming the exception, which the receivers' stop
    record says (docs/protocol.md, section 17b) so that a simulation closing now knows
    the trainer failed rather than waiting as for one that might come back. The error
    itself propagates unchanged (its traceback is the user's to read), and under
    several ranks it is noted for the others (`rank_failure.write_note`); except a
    collective's failure because another rank is gone, when that rank left a note:
    then this raises `rank_failure.RankFailed` naming that rank and its error, in place
    of the backend's words (`rank_failure.peer_failure`); when it left none (killed by a
    signal), a `rank_failure.RankGone` whose paragraph names the checkpoint to resume
    from (either is quiet: exit code 1, no traceback). A `dir_lost.OutputDirLost` (rank
    0's, said) leaves no note (it would make the removed directory again), and a rank
    whose collective broke as rank 0 left, its directory gone (`dir_lost.gone_under`),
    raises a quiet copy of it, saying nothing.

    A `KeyboardInterrupt` (Ctrl-C that the preemption handler did not take: Python's own
    SIGINT handler restored by code the user called, a library's re-raise) is noted
    ``preempted``, as the handler's Ctrl-C is: a user who presses Ctrl-C resumes, and
    their solvers must follow. Not ``error`` (a solver's close would fail at once), nor
    the ``stopped`` a receiver says when told nothing: with it a solver takes the
    record's receipts as final (`client.stopped`) and exits, while no checkpoint was
    written at this stop, so the run resumed from the latest one lacks its last steps and
    nothing sends them again; with ``preempted`` it waits for the resumed run and follows
    it (`client.follow`). So is a collective's failure because another rank is gone that
    left no note (`rank_failure.lost_a_peer`: a rank killed by a signal), for the same
    reason: the run is resumed, and a single rank's SIGKILL lets its solvers follow;
    noted ``broken`` when every peer is alive on this host (`RankGone.state`: a network
    error, a collective's timeout, not a signal), which solvers follow as ``preempted``.
    Under torchrun with no restart left (`launch_restarts.restarts_left` 0) each of these
    records (the interrupt's, a peer's loss) says that no restart follows
    (`launch_restarts.with_no_restart`), as a graceful preemption's
    (`ending.end_training`) and a forced exit's (`starting.forced_stop`) do: the resume
    it promises is then a person's or a scheduler's requeue, never torchrun's; and a
    peer's loss cannot tell torchrun's teardown after a peer's death from a preemption
    (a peer that failed with an exception, in its loop or its start,
    `starting.note_start_failure`, left a note: ``error``).

    Under torchrun, a collective's failure because another rank is gone first holds
    SIGTERM (`exit_meeting.hold_term`, over `preemption`'s handler, the trainer's): its
    agent SIGTERMs this rank as soon as it sees the other's exit (within 0.1 s), while
    this rank still waits for its note, and the handler said "stopping at the next stop
    synchronisation to write a checkpoint", which never came (a rank whose peer was
    SIGKILLed in DDP's backward said it so). Dropped, it is said at exit as the
    launcher's, and the rank exits with its own status (1), not -15. (A SIGTERM that
    comes before this rank's error reaches here is still the handler's, its line said:
    another line then says the checkpoint will not be written.)"""
    if isinstance(error, KeyboardInterrupt):
        trainer.source.note_stop(
            "preempted",
            with_no_restart(
                f"interrupted (KeyboardInterrupt) at step {trainer.state.global_step}, with "
                "no checkpoint at this stop: a run resumed from the latest one takes what it "
                "lacks"
            ),
        )
        return
    if preemption is not None and trainer.num_processes > 1 and lost_a_peer(error):
        hold_term(previous=preemption.previous_term())  # (the launcher's SIGTERM: above)
        if (cause := preemption.cause) is not None:  # (it came first: its line was said)
            logger.warning(
                "%s: the checkpoint this stop asked for will not be written: another rank "
                "is gone and this rank's collective failed first (a run resumed from the "
                "latest checkpoint takes what it lacks)",
                cause,  # (a signal's name, or the launcher's death: not a SIGTERM)
            )
    if isinstance(error, OutputDirLost):  # (said; a note would make the directory again)
        trainer.source.note_restarts_resume(False)  # (no checkpoint left to resume from)
        trainer.source.note_stop("error", f"training stopped: {error_line(error)}")
        return
    # (no hook mark made: nothing tells a removed directory; `gone_under`)
    lost = trainer.num_processes > 1 and lost_a_peer(error) and trainer.hooks.marker is not None
    me = trainer.process_index if lost else 0
    if lost and gone_under(trainer.args.output_dir, NOTES_DIR, me, str(trainer.run_id)):
        # rank 0 stopped as the output directory is gone, and said so (`dir_lost`)
        quiet = elsewhere(OutputDirLost(trainer.args.output_dir, "removed"), max(me, 1))
        trainer.source.note_restarts_resume(False)
        trainer.source.note_stop("error", f"training stopped: {error_line(quiet)}")
        raise quiet from None
    other = peer_failure(trainer, error)  # (None: this rank's own error)
    if not isinstance(other, RankFailed):
        write_note(trainer, error)
    if isinstance(other, RankGone):
        # Another rank gone with no note: killed by a signal (the OOM killer, kill -9), or
        # out of reach (a network error: its opening says which the pids suggest), a
        # crash a resume recovers from, as one rank's SIGKILL (no record: its solvers
        # wait and follow). ``error`` ended the solvers started by hand at once (a user
        # trial: both exited 1 before the resume, and the resumed trainer starved).
        # With every peer alive on this host, no signal ended the run (a network error,
        # a collective's timeout): ``broken``, which solvers follow as ``preempted`` (a
        # resume recovers from it: torchrun's restarts, --resume_from_checkpoint) but
        # whose words do not say "preempted" (docs/protocol.md, "The stop record")
        # (under torchrun with no restart left, the promise is a person's to keep: said)
        trainer.source.note_stop(
            "broken" if other.state == ALIVE else "preempted",
            with_no_restart(
                f"training stopped at step {trainer.state.global_step}: {other.opening}, "
                f"with no checkpoint at this stop: a run resumed from the latest one takes "
                f"what it lacks"
            ),
        )
        raise other from None  # (its paragraph said it all: gloo's traceback adds nothing)
    said = error_line(error if other is None else other)
    trainer.source.note_stop(
        "error", f"training stopped at step {trainer.state.global_step}: {said}"[:1000]
    )
    if other is not None:
        raise other from None  # (the backend's traceback says nothing of the cause)
