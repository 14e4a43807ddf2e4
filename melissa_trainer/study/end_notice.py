"""Rank 0 tells every other rank's receiver when the study has ended (`StudyEndNotice`):
a STUDY_END naming the simulations its launcher counts finished, sent once every
simulation has finished or been given up and every job has exited.

Why a message, and why from here. A rank's stream ends on its own count of finished
simulations; a rank other than 0 that lacks one that rank 0 has complete (a lost message,
a bug, a resume whose checkpoint lacked it) would wait in silence until its stall timeout,
while rank 0 waits in the stop agreement at the end of its loop: that rank's training
thread is blocked waiting for data, so no collective can tell it; and rank 0's training
thread is blocked in the collective, so the word must come from another thread: this
one, which watches the launcher. The message goes over the stream's own sockets, at the
endpoints and with the CURVE keys each rank published in the rendezvous (as ABANDON), so
it reaches ranks on other nodes. What a receiver does with it: `stream.study_end`.

The endpoints are read when the thread starts (the receivers have all published: the
study starts after the ranks' barrier), not at the end, when a rank whose stream has
ended may have stopped its receiver and marked its file stopped. A receiver that has
stopped gets nothing (the message is dropped after a short linger); one whose stream has
ended ignores it. `stop` (from `Study.stop`) ends the wait; the thread is a daemon.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.stream.control import send_study_end
from melissa_trainer.stream.endpoints import fetch_rendezvous

__all__ = ["StudyEndNotice"]

logger = logging.getLogger(__name__)

#: seconds a STUDY_END may take to reach a receiver (a live one: milliseconds)
SEND_TIMEOUT = 2.0


class StudyEndNotice:
    """The thread that sends the STUDY_END (module docstring). `told` is set once it has
    been handed to every other rank's connection (or there was no other rank)."""

    def __init__(self, launcher: Launcher, rendezvous: Path) -> None:
        self._launcher, self._rendezvous = launcher, rendezvous
        self._stop = threading.Event()
        #: set once sent (tests wait on it); `ranks` are the ranks it was sent to
        self.told = threading.Event()
        self.ranks: list[int] = []
        self._thread = threading.Thread(target=self._run, name="melissa-study-end", daemon=True)

    @classmethod
    def start(cls, launcher: Launcher, rendezvous: Path) -> StudyEndNotice:
        """A notice for `launcher`'s study, its thread started (after `launcher.start`)."""
        notice = cls(launcher, rendezvous)
        notice._thread.start()
        return notice

    def stop(self) -> None:
        """Stop waiting (any thread; does not wait for a send in progress)."""
        self._stop.set()

    def _run(self) -> None:
        try:
            entries = [e for e in fetch_rendezvous(self._rendezvous) if int(e["rank"]) != 0]
            launcher, poll = self._launcher, self._launcher.tuning.poll_interval
            while not (launcher.done and launcher.jobs_alive() == 0):
                try:
                    launcher.check()
                except LauncherError:
                    return  # (the study failed: its error says so on rank 0)
                if self._stop.wait(poll):
                    return
            if self._stop.is_set():
                return
            finished = [o.simulation_id for o in launcher.outcomes() if o.status == "finished"]
            send_study_end(
                [str(e["endpoint"]) for e in entries],
                finished,
                timeout=SEND_TIMEOUT,
                curve_public_key=[e.get("curve_public_key") for e in entries],
            )
            self.ranks = [int(e["rank"]) for e in entries]
            if self.ranks:  # (said on rank 0, whose collective waits for a rank that stops)
                logger.info(
                    "the study has ended: ranks %s told which %d simulations are finished "
                    "(a rank that lacks one of them stops, naming it)",
                    self.ranks,
                    len(finished),
                )
            self.told.set()
        except Exception as exc:  # (a daemon thread: said, never lost)
            logger.warning(
                "could not tell the other ranks that the study has ended (%r): a rank that "
                "lacks a simulation's data waits for its stall_timeout instead",
                exc,
            )
