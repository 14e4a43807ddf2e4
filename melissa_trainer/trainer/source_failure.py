"""A source's failure under several ranks, agreed by every rank at one step, so that
every rank writes a checkpoint of that step together, as a single process does
(`ending.save_at_failure`) and as every rank does at a preemption.

The ranks meet a source's failure at steps of their own: rank 0 reads its study's
failure, another rank learns it from rank 0's progress file (`study.progress`), or
never. A rank that raised at once left the others to fail at their next collective
(`rank_failure.RankFailed`), and no rank could save: a save is collective. So a rank
whose read of data (`StreamDataset.prefetch`, the one place the loop waits for its
source) raises a `SourceError` whose training is kept (`ending.keeps_training`) holds
it (`SourceFailure.prefetch`): it notes it for the others (`rank_failure.write_note`),
reads no more data, and says it in the next agreement of the loop (`core.stop_sync`:
``source_failed``, its rank + 1), which every rank reads at the same window. There,
before the window's steps, every rank stops (`SourceFailure.agreed_on`): the failing
rank raises its error, which `ending.source_failed` turns into the checkpoint and the
line; another rank writes the same checkpoint with it (`peer_source_failed`) and raises
`RankFailed` naming the failing rank and its error. The checkpoint holds every rank's
pending batches (taken from the buffer, not trained), as at a preemption: a resume
trains each once. A preemption agreed at the same agreement (a signal, the launcher's
death) is the weaker fact: every rank ends as for the failure (exit status 1, not
`Preempted`'s 143), and its line names the preemption too, which the same checkpoint
covers (`at_agreement`). Once done, the ranks meet before they exit
(`exit_meeting.meet`: no rank exits while another still works).

A scheduler that raises at its step under several ranks (`trainer.schedule_end`: on one
rank only, a user's lambda that reads a file) is held the same way
(`SourceFailure.hold_schedule`), after its step: the rank trains on in step with the
others until the agreement, where the failing rank's error is `schedule_end.
schedule_failed`'s `ScheduleEnded`, written with the others' checkpoint.

A failure that cannot be agreed on is said as before: raised elsewhere (a hook, the
source's start), with a `__cause__` (the user's traceback), or when the agreement
itself breaks (another rank crashed: `SourceFailure.unagreed`): the failing rank raises
its error with no checkpoint, the others `RankFailed` at their next collective.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from melissa_trainer.core.schedule_length import SchedulerStepError
from melissa_trainer.sources.source import SourceError
from melissa_trainer.trainer.ending import (
    EndingTrainer,
    keeps_training,
    save_at_failure,
    source_failed,
)
from melissa_trainer.trainer.rank_failure import (
    RankFailed,
    error_line,
    lost_a_peer,
    note_of,
    peer_failure,
    peer_words,
    write_note,
)
from melissa_trainer.trainer.resume_words import failure_words
from melissa_trainer.trainer.schedule_end import schedule_failed, schedule_note
from melissa_trainer.trainer.stop_cause import StopCause

__all__ = ["SourceFailure", "peer_source_failed"]

logger = logging.getLogger(__name__)


class SourceFailure:
    """This rank's source failure, or its scheduler's, held until the ranks agree on it
    (module docstring); one per `train()`. Training thread only."""

    def __init__(self, trainer: EndingTrainer) -> None:
        self._trainer = trainer
        #: this rank's source error, or its scheduler's, held (None: neither failed)
        self.error: SourceError | SchedulerStepError | None = None
        #: the step at which the scheduler's error held raised (0: none held)
        self.raised_at = 0
        #: the ranks agreed on a failure (`agreed_on`): they save together
        self.agreed = False
        #: the preemption agreed at the failure's agreement, in words ("" none): its
        #: line names it (`at_agreement`)
        self.also = ""

    def prefetch(self, n: int, interrupted: Callable[[], bool] | None = None) -> int:
        """`StreamDataset.prefetch`, but under several ranks a `SourceError` whose
        training is kept is held, not raised: this returns the batches already pending
        (at most `n`), and so does every later call (no data is read any more)."""
        trainer = self._trainer
        if self.error is None:
            try:
                return trainer.dataset.prefetch(n, interrupted)
            except SourceError as exc:
                if not trainer.stop_sync.distributed or not keeps_training(exc):
                    raise
                self._hold(exc, exc, "its source failed")
        return min(n, trainer.dataset.num_pending)

    def _hold(self, error: SourceError | SchedulerStepError, note: Exception, what: str) -> None:
        """Hold `error`, noted for the others as `note` (before the agreement: they
        name it), said at INFO as `what` happened at this step."""
        trainer = self._trainer
        self.error = error
        write_note(trainer, note)
        logger.info(
            "rank %d: %s at step %d; every rank stops at the next stop synchronisation, "
            "to write a checkpoint there",
            trainer.process_index,
            what,
            trainer.state.global_step,
        )

    def hold_schedule(self, failed: SchedulerStepError) -> None:
        """Under several ranks, after the lr_scheduler raised at the step just counted
        (`failed`, its error the cause): held until the agreement (`agreed_on`), the
        rank training on meanwhile. Its later raises until then are the same failure,
        held already; a source's failure held first stays the one to say (this one
        said at WARNING)."""
        trainer, step = self._trainer, self._trainer.state.global_step
        if self.error is None:
            self.raised_at = step
            self._hold(failed, schedule_note(failed, step), "its lr_scheduler raised")
        elif isinstance(self.error, SourceError):
            logger.warning(
                "rank %d: %s at step %d too, while its source's failure waits for the "
                "ranks' agreement",
                trainer.process_index,
                error_line(schedule_note(failed, step)),
                step,
            )

    @property
    def words(self) -> str:
        """The failure held, in words for the exit meeting's lines (`exit_meeting.meet`)."""
        held = "a scheduler's" if isinstance(self.error, SchedulerStepError) else "a source's"
        return f"{held} failure"

    @property
    def code(self) -> int:
        """What this rank says in the agreement (`StopSync.start`'s ``source_failed``):
        its rank + 1 when its source failed, else 0."""
        return 0 if self.error is None else self._trainer.process_index + 1

    def at_agreement(
        self, failed: int | None, signum: int, check_losses: Callable[[], None]
    ) -> Exception | None:
        """After an agreement (`StopSync.result`) that says `failed` (its
        ``source_failed``: None, no rank's source failed) and `signum` (the preemption
        agreed, its `StopCause.code`; 0: none): None, or what every rank raises there
        (`agreed_on`). A failure wins over a preemption agreed with it (module docstring):
        `signum` is then named in the lines, not raised as `Preempted`."""
        if failed is None:
            return None
        cause = StopCause.of(signum)
        if cause is not None:
            self.also = (
                f"{cause} came at the same stop (a preemption): the checkpoint of the "
                "failure covers it"
            )
        return self.agreed_on(failed, check_losses)

    def at_end(self, signum: int, check_losses: Callable[[], None]) -> Exception | None:
        """After the loop, under several ranks with an lr_scheduler (the same on every
        rank): one more agreement on the failures held (collective: one all-reduce per
        `train()`), since a scheduler may have raised after the last one the loop read
        (in its last window): then what every rank raises there (`at_agreement`, with
        the preemption `signum` the loop agreed on, if any); else None."""
        trainer = self._trainer
        sync = trainer.stop_sync
        if not sync.distributed or trainer.lr_scheduler is None:
            return None
        if sync.started:  # (none is left started today: read it, so that one starts)
            sync.result()
        sync.agree(False, 0, source_failed=self.code)
        return self.at_agreement(sync.source_failed, signum, check_losses)

    def agreed_on(self, rank: int, check_losses: Callable[[], None]) -> Exception:
        """What to raise once the agreement said that `rank`'s source (or scheduler)
        failed (the largest such rank): this rank's own source error (for
        `ending.source_failed`, with ``together``: `said`), its scheduler's as
        `schedule_end.schedule_failed`'s `ScheduleEnded` once the checkpoint is written
        with the others', or, on a rank whose neither failed, `peer_source_failed`'s
        `RankFailed`, once the checkpoint is written with the others'."""
        self.agreed = True
        if isinstance(self.error, SchedulerStepError):
            ended = schedule_failed(self._trainer, self.error, check_losses, True, self.raised_at)
            if self.also:  # (a preemption agreed with it: the same checkpoint covers it)
                ended.add_note(self.also)
            return ended
        if self.error is not None:
            return self.error
        return peer_source_failed(self._trainer, rank, check_losses, self.also)

    def said(self, error: SourceError, check_losses: Callable[[], None]) -> SourceError:
        """What `train()` raises for `error`, a `SourceError` that propagated:
        `ending.source_failed`'s, saved with the other ranks when they agreed on it, its
        line naming a preemption agreed with it."""
        return source_failed(self._trainer, error, check_losses, self.agreed, self.also)

    def unagreed(self, error: Exception) -> Exception | None:
        """When this rank's source (or scheduler) failed and a collective broke with
        `error` because another rank is gone (`rank_failure.lost_a_peer`) before the
        agreement: that rank's note is read (`rank_failure.peer_failure`), and this
        returns what to raise, this rank's own error as `ending.source_failed` (or
        `schedule_end.schedule_failed`, its ``__cause__`` the scheduler's) says it, with
        no checkpoint (the ranks cannot save together), the other rank's end said in its
        line (`rank_failure.peer_words`; the scheduler's: a note), not in one of its
        own. None in any other case (`error` is this rank's to raise)."""
        held = self.error
        if held is None or self.agreed or not lost_a_peer(error):
            return None
        trainer = self._trainer
        # One account, this rank's own failure's: it is what this rank raises (its exit
        # status, its source's resume note: what a resume keeps), and the peer's end is
        # why no checkpoint is written, said in the same line. (Before, the peer's ERROR
        # paragraph came first, with a resume line of its own, then the failure's: two
        # lines naming the checkpoint to resume from, the first not naming the failure.)
        other = peer_failure(trainer, error, say=False)
        peer = "" if other is None else peer_words(other)  # (None: `lost_a_peer` said so)
        if isinstance(held, SourceError):
            return source_failed(trainer, held, also=peer)
        ended = schedule_failed(trainer, held, lambda: None, False, self.raised_at)
        if peer:
            ended.add_note(peer)
        write_note(trainer, ended)  # (as `failing.failed` notes a rank's own error)
        said = f"training stopped at step {trainer.state.global_step}: {error_line(ended)}"
        trainer.source.note_stop("error", said[:1000])
        return ended


def peer_source_failed(
    trainer: EndingTrainer, rank: int, check_losses: Callable[[], None], also: str = ""
) -> RankFailed:
    """On a rank whose source did not fail, at the step every rank agreed that `rank`'s
    did: the checkpoint written with every rank (`ending.save_at_failure`, collective),
    an ERROR line naming `rank`, its error (its note: `rank_failure.note_of`), `also`
    (a preemption agreed with it, in words; "" none) and what a resume does
    (`ending.failure_words`), and the `RankFailed` to raise (exit code 1)."""
    words = note_of(trainer, rank) or "it failed (it left no note of why)"
    written, why = save_at_failure(trainer, check_losses, together=True)
    failure = RankFailed(rank, words)
    logger.error(
        "%s; rank %d stops at step %d with it, as every rank; %s%s",
        failure,
        trainer.process_index,
        trainer.state.global_step,
        f"{also}; " if also else "",
        failure_words(trainer, written, why, ""),
    )
    return failure
