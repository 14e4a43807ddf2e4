"""Rank 0 tells every other rank's receiver when the study has ended (`StudyEndNotice`):
a STUDY_END naming the simulations whose process ended with exit 0, sent once no job is
alive and nothing is left to start, and either every simulation has finished or been
given up (the launcher is `done`), or the ones left "exited" are held back on rank 0.

Why a message, and why from here. A rank's stream ends on its own count of finished
simulations; a rank other than 0 that lacks one that rank 0 has complete (a lost message,
a bug, a resume whose checkpoint lacked it) would wait in silence until its stall timeout,
while rank 0 waits in the stop agreement at the end of its loop: that rank's training
thread is blocked waiting for data, so no collective can tell it; and rank 0's training
thread is blocked in the collective, so the word must come from another thread: this
one, which watches the launcher. The message goes over the stream's own sockets, at the
endpoints and with the CURVE keys each rank published in the rendezvous (as ABANDON), so
it reaches ranks on other nodes. What a receiver does with it: `stream.study_end`.

When, without `done`. With a rate-limited buffer (the default reservoir) rank 0, which
draws nothing while it waits for the lacking rank, cannot insert: its receiver waits for
room, its last simulations' data waits in its socket, and its launcher never counts them
finished ("exited": exit 0, data not all in), so `done` never comes. So the notice also
goes when no job is alive, nothing is pending (no first run, no restart, nothing left to
draw), and rank 0's receiver has waited for room (`Launcher.data_backpressured`) at every
poll for `HELD` seconds, unless the study has failed (`Launcher.failed`, from the moment
the launcher's thread judges it so: a simulation refused after its exit 0, given up for
good, leaves the others exited and held; the ranks are then told the failure). Why that
is safe:

* Exit 0 of a launched simulation guarantees only that its client's messages left its
  process (its close waits for no receipt: `client.confirm`), not that a receiver read
  them; a rank judges only after its socket has stayed empty for the grace, so what
  is still in flight is read first, and a rank merely held back (its socket not
  empty) is never judged.
* An exited simulation is judged incomplete, and rerun, only once rank 0's receiver is
  idle with its socket empty (`supervisor.check_data`); while it waits for room it is
  not, and here it waits for the rank being told. Without that wait (rank 0 idle, its
  data lost, or a solver that exits 0 without its BYE), no notice goes: the launcher's
  own judgment, and its message, come first. A rank that has every listed simulation
  has what its own count ends on (one that missed an ABANDON ends, as at `done`), so a
  simulation judged incomplete on rank 0 later, and run again, changes nothing there
  that the count did not (what a rerun sends it, it has).

A failure after a held notice. The held notice goes while rank 0 still has data of
exited simulations to read, and reading it may yet fail the study (a NaN refused under
``nonfinite="fail"`` after the simulation's exit 0, with ``on_failure="raise"``; any
late refusal that fails it). No second word follows, and none is needed: the notice ends
a rank's stream, never its training. A rank whose stream has ended leaves its training
loop only at a stop every rank agrees on (`core.stop_sync`); until rank 0's own data has
run out it trains on its last batches again (`StreamDataset.pad`), in lockstep with rank
0. Rank 0 reads its launcher before each read of its buffer (`Study.wait_for`), so the
failure is met on rank 0's training thread (a `SourceError`), which every rank learns at
the same step's agreement: all save that step together, then rank 0 raises it and every
other rank `RankFailed`, naming rank 0's error (`trainer.source_failure`): no rank exits
0 or writes its end-of-training checkpoint
(tests/study/test_end_notice_then_failure.py: two ranks, real solvers; with the padding
removed, both ranks returned and saved at the end, rank 0's NaN unread). A simulation
refused on another rank after the notice (its failure handed to rank 0,
`nonfinite_handoff`) is not judged lacking there but awaited (`stream.study_end`):
rank 0's launcher, whose receiver hears hand-offs also while held, runs it again, gives
it up or fails the study. So after the notice this thread goes on polling until `stop`
or the study fails: it keeps rank 0's progress file current (a restart that runs; the
failure, `_failed`), which the waiting rank reads (`study.starvation`). Before, it
returned once it had sent: that rank judged the simulation lacking within its grace
and failed a study allowed a restart (tests/study/test_end_notice_then_failure.py).

It is sent once (the first of the two conditions met); a receiver uses only the first
it reads (`stream.study_end`), so a second one would change nothing. Never for a study
whose launcher has failed: the held condition reads counts only (`done` is False once
the study failed), so the launcher's error is read again before such a notice goes, and
told instead (`_failed`).

The endpoints are read when the thread starts (the receivers have all published: the
study starts after the ranks' barrier), not at the end, when a rank whose stream has
ended may have stopped its receiver and marked its file stopped. A receiver that has
stopped gets nothing (the message is dropped after a short linger); one whose stream has
ended ignores it. `stop` (from `Study.stop`) ends the wait; the thread is a daemon.

The same thread updates rank 0's progress file at each poll, before and after the
notice (`study.progress`); a second daemon thread beats it (`ProgressFile.beat`) every
`REFRESH` s, so that the excuse it carries stays fresh while this one waits for its
next poll (``poll_interval``, maybe 30 s) or in `Launcher.summary` (the launcher's
lock, held through a slow ``squeue``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.stream.control import send_study_end
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.study.progress import REFRESH, ProgressFile

__all__ = ["StudyEndNotice"]

logger = logging.getLogger(__name__)

#: seconds a STUDY_END may take to reach a receiver (a live one: milliseconds)
SEND_TIMEOUT = 2.0
#: seconds rank 0's receiver must have waited for room, at every poll, before a notice
#: that does not wait for `done` (`data_watch.DRAIN_GRACE` + `IDLE_GRACE`: as long as the
#: launcher's own judgment of an exited simulation takes)
HELD = 3.0
#: the statuses of a simulation whose process ended with exit 0 (`study_record`)
EXITED_0 = ("finished", "exited")


class StudyEndNotice:
    """The thread that sends the STUDY_END (module docstring), once. `told` is set once
    it has been handed to every other rank's connection (or there was no other rank)."""

    def __init__(
        self,
        launcher: Launcher,
        rendezvous: Path,
        run_id: str | None = None,
        beat_period: float = REFRESH,
    ) -> None:
        self._launcher, self._rendezvous = launcher, rendezvous
        #: what the other ranks' starvation watch reads (`study.progress`)
        self.progress = ProgressFile(rendezvous, run_id)
        self._stop = threading.Event()
        #: set once sent (tests wait on it); `ranks` are the ranks it was sent to
        self.told = threading.Event()
        self.ranks: list[int] = []
        #: True: sent without `done`, rank 0 held back (module docstring)
        self.held = False
        #: since when the held condition has been met at every poll (None: it is not)
        self._held_since: float | None = None
        self._thread = threading.Thread(target=self._run, name="melissa-study-end", daemon=True)
        self._beats = threading.Thread(target=self._beat, name="melissa-progress-beat", daemon=True)
        #: seconds between two beats of the progress file (`REFRESH`; tests shorten it)
        self.beat_period = beat_period

    @classmethod
    def start(
        cls,
        launcher: Launcher,
        rendezvous: Path,
        run_id: str | None = None,
        beat_period: float = REFRESH,
    ) -> StudyEndNotice:
        """A notice for `launcher`'s study, its threads started (after `launcher.start`);
        it also keeps rank 0's progress file up to date (`study.progress`, of `run_id`),
        beating it every `beat_period` s (module docstring)."""
        notice = cls(launcher, rendezvous, run_id, beat_period)
        notice._thread.start()
        notice._beats.start()
        return notice

    def stop(self) -> None:
        """Stop waiting (any thread; does not wait for a send in progress)."""
        self._stop.set()

    def ended(self, now: float) -> list[int] | None:
        """The ids to send if the study has ended by now (module docstring), else None.
        Called at each poll (the held condition must be met at every one)."""
        launcher = self._launcher
        if launcher.jobs_alive() != 0:
            self._held_since = None
            return None
        if launcher.done:
            return self._exited_0()
        counts = launcher.summary()
        if counts["running"] or counts["pending"] or not counts["exited"]:
            self._held_since = None
            return None
        if not launcher.data_backpressured():
            self._held_since = None
            return None
        if launcher.failed:  # (not ended, failed: the loop tells the ranks so, `_failed`)
            self._held_since = None
            return None
        if self._held_since is None:
            self._held_since = now
        if now - self._held_since < HELD:
            return None
        self.held = True
        return self._exited_0()

    def _exited_0(self) -> list[int]:
        return [o.simulation_id for o in self._launcher.outcomes() if o.status in EXITED_0]

    def _failed(self, error: LauncherError) -> None:
        """Tell the other ranks that the study failed with `error` (`progress.failed`);
        if that raises, say so, in those words (not the "has ended" of `_run`), never
        raised (a daemon thread)."""
        try:
            self.progress.failed(self._launcher, error)
        except Exception as exc:
            logger.warning(
                "could not tell the other ranks that the study failed (%r; the launcher's "
                "error: %s): a rank that waits for a batch waits for its stall_timeout "
                "instead",
                exc,
                error,
            )

    def _beat(self) -> None:
        """Beat the progress file every `beat_period` s until `stop` (module docstring).
        An error is said once at WARNING, and ends the beats (the other ranks then take
        the excuse as stale once `EXCUSE_AGE` passes without a poll's write)."""
        while not self._stop.wait(self.beat_period):
            try:
                self.progress.beat(self._launcher, period=self.beat_period)
            except Exception as exc:  # (a daemon thread: said, never lost)
                logger.warning(
                    "rank 0 stopped refreshing its progress file's excuse (%r): another rank "
                    "may take a long queued job's silence as not explained",
                    exc,
                )
                return

    def _watch(self, until: Callable[[], list[int] | None]) -> list[int] | None:
        """Poll the launcher, updating rank 0's progress file, until `until` returns ids
        (returned) or `stop` or the study fails (told to the other ranks: `_failed`),
        then None."""
        launcher, poll = self._launcher, self._launcher.tuning.poll_interval
        while (finished := until()) is None:
            self.progress.update(launcher)
            try:
                launcher.check()
            except LauncherError as exc:  # (its error says so on rank 0)
                self._failed(exc)  # (and to the others: `progress`)
                return None
            if self._stop.wait(poll):
                return None
        return None if self._stop.is_set() else finished

    def _run(self) -> None:
        try:
            entries = [e for e in fetch_rendezvous(self._rendezvous) if int(e["rank"]) != 0]
            finished = self._watch(lambda: self.ended(time.monotonic()))
            if finished is None:
                return
            send_study_end(
                [str(e["endpoint"]) for e in entries],
                finished,
                timeout=SEND_TIMEOUT,
                curve_public_key=[e.get("curve_public_key") for e in entries],
            )
            self.ranks = [int(e["rank"]) for e in entries]
            if self.ranks:  # (said on rank 0, whose collective waits for a rank that stops)
                held = (
                    " (rank 0's receiver waits for room in its buffer: some of their data "
                    "is not in yet)"
                    if self.held
                    else ""
                )
                logger.info(
                    "the study has ended: ranks %s told which %s ended with "
                    "exit 0%s (a rank that lacks one of them stops, naming it)",
                    self.ranks,
                    plural(len(finished), "simulation"),
                    held,
                )
            self.told.set()
        except Exception as exc:  # (a daemon thread: said, never lost)
            logger.warning(
                "could not tell the other ranks that the study has ended (%r): a rank that "
                "lacks a simulation's data waits for its stall_timeout instead",
                exc,
            )
        self._after()

    def _after(self) -> None:
        """After the notice: keep rank 0's progress file current until `stop` or the
        study fails (module docstring, "A failure after a held notice")."""
        try:
            self._watch(lambda: None)
        except Exception as exc:  # (a daemon thread: said, never lost)
            logger.warning(
                "rank 0 stopped updating its progress file after the end-of-study notice "
                "(%r): a rank that waits for a simulation run again waits for its "
                "stall_timeout instead",
                exc,
            )
