"""`StudyStop`: how a `Study` stops, a base class of it.

`stop` ends the simulations first (none outlives the trainer), then the receivers:

* At the end of the stream (END_OF_STREAM on any rank, `on_end_of_stream`, or this
  rank's receiver ended) the last simulations get `STOP_WAIT` s, in all, to exit and
  their data to arrive (then finished, not rerun on resume): rank 0 waits for them at
  LOOP_END already, before the final log and checkpoint (`on_loop_end`), and `stop`
  waits only for what is left of the same bound (`closing.LastExits`).
* Stopped with data to come (`max_steps`, a hook), after `wait_for` raised, or once
  preempted (`on_preempted`): no wait, the simulations are killed at once (they may
  block on a full buffer).
* Then, once (a `stop` called twice says it once), rank 0's end-of-run account
  (`closing.log_study_account`), kept in `account_report` when not a WARNING.

`stop_bound` bounds all that, the same on every rank, for the trainer's exit meeting.
Training thread only. `Study` sets the attributes declared here.
"""

from __future__ import annotations

from melissa_trainer.launcher import Launcher
from melissa_trainer.stream.rank_activity import FINAL_WAIT, ActivityPublisher
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.closing import LastExits, log_study_account
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.every_rank import EveryRankReport
from melissa_trainer.study.feedback import FeedbackCheck
from melissa_trainer.study.saved_account import SavedAccount

__all__ = ["STOP_WAIT", "StudyStop"]

#: seconds simulations get to exit by themselves once the stream has ended
STOP_WAIT = 10.0


class StudyStop:
    """The stop of a `Study` and the run's events that decide how long it waits (which
    `Study` sets the attributes declared here for)."""

    launcher: Launcher
    stream: StreamSource
    #: the launcher runs (rank 0 only)
    _started: bool
    #: wait_for raised: training stops with an error
    _failed: bool
    #: on_preempted: stop need not wait either
    _preempted: bool
    #: on_end_of_stream: the last simulations are closing
    _stream_over: bool
    #: the bound on the wait for the last simulations' exits (`STOP_WAIT` s in all)
    _last_exits: LastExits
    #: rank 0: tells the ranks the study's end
    _end_notice: StudyEndNotice | None
    #: another rank's hand-off of its receiver's counts to rank 0 (`every_rank`)
    _publisher: ActivityPublisher | None
    #: rank 0: every rank's receiver heard (its launcher's, its account's)
    _ranks: EveryRankReport | None
    #: the end-of-run account was logged
    _accounted: bool
    #: rank 0, after `stop`: the account when not a WARNING (`ProgressHook` prints it)
    account_report: list[str]
    #: what a resume from the last checkpoint does (its words end the account)
    saved_account: SavedAccount
    #: rank 0: did the losses steer a draw? (the account's warning)
    feedback: FeedbackCheck

    def stop(self) -> None:
        """End the simulations (none outlives the trainer), then the receivers."""
        receiver = self.stream.receiver
        # told before the kills (rank 0, after the wait, tells every rank's: it kills), the
        # receivers summarise those closes as the study's, not one WARNING each (`connections`)
        told = None if receiver is None else lambda: receiver.study_stops(self._started)
        if not self._started and told is not None:
            told()
        try:
            if self._end_notice is not None:
                self._end_notice.stop()
            if self._started:
                # At the end of the stream (any rank) the last simulations may exit and
                # their data arrive (finished, not rerun on resume). Stopped with data to
                # come, an error or a preemption: no wait (they may block on a full buffer).
                self._last_exits.stop(self.launcher, STOP_WAIT, self._closing(), told)
                if not self._accounted:  # the account (`closing`), once (stopped twice)
                    self._accounted = True
                    account = log_study_account(self.launcher, receiver, self.feedback, self._ranks)
                    self.account_report = account + self._last_exits.stopped_lines()  # (killed)
                    self.account_report += self.saved_account.lines()  # (its resume's words)
        finally:  # (the receiver first: the publisher's last word has its last steps)
            try:
                self.stream.stop()
            finally:
                if self._publisher is not None:
                    self._publisher.stop()

    def stop_bound(self) -> float:
        """`Source.stop_bound`: the last simulations' `STOP_WAIT`, the account's wait for the
        other ranks' last counts (`FINAL_WAIT`), the launcher's stop (`Backend.stop_bound`:
        its kill of every job). Known on every rank: the same launcher, run on rank 0 only."""
        grace = self.launcher.tuning.kill_grace
        return STOP_WAIT + FINAL_WAIT + self.launcher.backend.stop_bound(grace)

    def note_stop(self, code: str, message: str) -> None:
        """`Source.note_stop`: to the receivers, whose stop record says it to the closing."""
        self.stream.note_stop(code, message)

    def note_restarts_resume(self, resumes: bool) -> None:
        """`Source.note_restarts_resume`: to the receivers, whose stop record says it."""
        self.stream.note_restarts_resume(resumes)

    def _closing(self) -> bool:
        """The stream has ended (any rank), and no error or preemption hurries the stop."""
        receiver = self.stream.receiver
        ended = self._stream_over or (receiver is not None and receiver.ended)
        return ended and not (self._failed or self._preempted)

    def on_loop_end(self, preempted: bool) -> None:
        """Rank 0, at LOOP_END (the source runs; the final log and checkpoint follow): at the
        end of the stream, unless `preempted`, wait for the launcher to see the last exits
        (`closing`: at most `STOP_WAIT` s, which `stop` does not add to)."""
        if self._started and not preempted and self._closing():
            self._last_exits.wait(self.launcher, STOP_WAIT)

    def on_end_of_stream(self) -> None:
        """The stream has ended on some rank (END_OF_STREAM): `stop` gives the last simulations
        `STOP_WAIT` s to exit and their data to arrive."""
        self._stream_over = True

    def on_preempted(self) -> None:
        """The run is preempted (PREEMPTED; its checkpoint written): `stop` kills the simulations at
        once, without the `STOP_WAIT` for the last ones' data (measured: a SIGTERM with
        every simulation launched exited after 11.4 s, the checkpoint written at 0.1 s)."""
        self._preempted = True
