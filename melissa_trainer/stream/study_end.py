"""The end of the study, as every receiver learns it: rank 0 sends a STUDY_END
(`melissa_trainer.wire.study_end`) naming the simulations whose process ended with exit
0, once no job is alive and nothing is left to start, and either every simulation has
finished or been given up, or rank 0's receiver is held back waiting for room in its
buffer (`melissa_trainer.study.end_notice`), to every rank's receiver (the endpoints and CURVE
keys of the rendezvous, as ABANDON: no file system shared between the ranks' nodes is
assumed beyond the rendezvous every client already reads).

Why. A rank's stream ends when it has the data of `expected_simulations` simulations
(ABANDONed ones count). A rank other than 0 that lacks the data of a simulation whose
process ended with exit 0 (its client's messages left it) was told nothing: it waited, saying
"training has waited 60 s for data", until its stall timeout (600 s), while rank 0 waited
at the end of its loop. Now, once the receiver has read the STUDY_END and its socket has
then stayed empty for `ReceiverTuning.study_end_grace` seconds (no job is alive: what is
still to come of their data is in flight, milliseconds; the grace is far more):

* it lacks none of them: its stream ends (it has every piece of data the study made;
  what it waited for was given up, e.g. an ABANDON it never read);
* it lacks some: the receiver fails with `StudyLacksError`, naming its rank, each
  simulation it lacks with what it has of it, and the fix (a resume runs them again):
  `check` raises it on this rank's training thread within the grace, not at the stall
  timeout.

The word is "no more data", not "the study succeeded": a stream that ends so ends no
training by itself. The rank trains on (padding its window) until every rank agrees to
stop, so a study that fails later on rank 0 (its held data refused) fails this rank too
(`melissa_trainer.study.end_notice`, "A failure after a held notice").

A simulation run again is not judged (awaited, not lacked): one this rank refused under
``nonfinite="fail"`` and handed to rank 0 (`nonfinite_handoff`: no HELLO of a later
attempt since), or one whose later attempt said HELLO here after the STUDY_END. The
notice may have gone, held, before that failure (`study.end_notice`): rank 0's launcher
restarts it (this rank then gets the restart's data), gives it up (an ABANDON: given
up, not lacked) or fails the study (rank 0's progress file says so, and this rank's
wait for a batch ends with it, `study.starvation`). Judged lacking at once, it failed a
study allowed a restart (tests/study/test_end_notice_then_failure.py). The wait is
bounded as any silence: the stall watchdog runs on (`stall_timeout`, excused only by
what rank 0 publishes of its launcher), and the judgment is made again at each empty
poll, so a simulation no longer awaited (given up, or run again and still lacking once
its restart ended) is judged then.

A STUDY_END read after the stream ended (the common case: every rank had everything) is
not counted as ``ignored_after_end`` (`DataPath`): it is expected there. Only the first
one read is used (rank 0 sends one; a second would change nothing). A rank whose socket
still holds messages (held back by its own buffer) does not judge: the grace counts
only empty polls. Thread-safety: `told` and `check` from the
ingesting thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from melissa_trainer.common.words import plural
from melissa_trainer.wire.messages import StudyEnd

if TYPE_CHECKING:
    from melissa_trainer.stream.ingest import Ingest
    from melissa_trainer.stream.nonfinite import NonFiniteGuard

__all__ = ["StudyEndCheck", "StudyLacksError"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: how many lacked simulations the error describes one by one
_SHOWN = 8


class StudyLacksError(RuntimeError):
    """The study has ended and this rank lacks the data of simulations whose process
    ended with exit 0 (module docstring); the message names them, the rank and the fix."""


class StudyEndCheck:
    """A receiver's record of the STUDY_END it read (`told`), and the judgment made at
    each empty poll once `grace` idle seconds have passed since it (`check`). `guard`:
    the receiver's `NonFiniteGuard` (its attempts and failures: what is run again, module
    docstring); None judges every listed simulation."""

    def __init__(self, rank: int, grace: float, guard: NonFiniteGuard | None = None) -> None:
        self.rank, self.grace, self._guard = rank, grace, guard
        #: the ids whose process ended with exit 0, once told (None: not told)
        self.finished: list[int] | None = None
        #: each listed simulation's attempt here when told (a later one runs again)
        self._attempts: dict[int, int] = {}
        self._said: set[int] = set()  # the awaited simulations said once

    def told(self, msg: StudyEnd, ended: bool) -> None:
        """Record `msg` (the first one only); nothing once the stream has `ended`."""
        if self.finished is not None or ended:
            return
        self.finished = [int(s) for s in msg.finished]
        if self._guard is not None:
            self._attempts = {s: self._guard.attempt(s) for s in self.finished}
        logger.info(
            "receiver of rank %d: rank 0 says the study has ended (%s ended with "
            "exit 0); this rank's stream ends or fails after %g s of silence",
            self.rank,
            plural(len(self.finished), "simulation"),
            self.grace,
        )

    def lacked(self, ingest: Ingest) -> list[int]:
        """The ids told (ended with exit 0) whose data `ingest` does not have complete (those it
        was told were given up left out: the launcher said so)."""
        finished = self.finished or []
        given_up = ingest.abandoned | ingest.replaced
        sims, archive = ingest.sims, ingest.archive
        return [
            s
            for s in finished
            if s not in archive and not (s in sims and sims[s].finished) and s not in given_up
        ]

    def check(self, idle: float, ingest: Ingest, end: Callable[[str], None]) -> None:
        """At an empty poll, the stream not ended, `idle` seconds after the last message:
        once told and past the grace, call `end` (nothing lacked) or raise.

        Raises:
            StudyLacksError: this rank lacks simulations that ended with exit 0.
        """
        if self.finished is None or idle < self.grace:
            return
        lacked, awaited = self._split(self.lacked(ingest))
        n = len(self.finished)
        if not lacked and awaited:
            self._say(awaited, ingest)
            return
        if not lacked:
            end(f"rank 0 says the study has ended, and this rank has the data of the {n} "
                f"simulations that ended with exit 0")  # fmt: skip
            return
        shown = "; ".join(f"simulation {s}: {ingest.describe(s)}" for s in lacked[:_SHOWN])
        more = f"; and {len(lacked) - _SHOWN} more" if len(lacked) > _SHOWN else ""
        ids = ", ".join(str(s) for s in lacked[:_SHOWN]) + (", ..." if more else "")
        raise StudyLacksError(
            f"the study has ended, and rank {self.rank} lacks the data of "
            f"{len(lacked)} of the {n} simulations whose process ended with exit 0 "
            f"(simulation {ids}; none is run again): {shown}{more}. No simulation runs "
            f"any more, so none will send it: rank {self.rank} stops now rather than "
            f"wait for stall_timeout. A run resumed from a checkpoint runs it again (a "
            f"resumed study runs every simulation that some rank's checkpoint lacks)"
        )

    def _split(self, lacked: list[int]) -> tuple[list[int], list[int]]:
        """`lacked` as (those lacked for good, those run again: module docstring)."""
        guard = self._guard
        if guard is None:
            return lacked, []
        attempts = self._attempts
        again = {s for s in lacked if guard.failed_now(s) or guard.attempt(s) > attempts.get(s, 0)}
        return [s for s in lacked if s not in again], [s for s in lacked if s in again]

    def _say(self, awaited: list[int], ingest: Ingest) -> None:
        """Say once per simulation that this rank waits for it (module docstring)."""
        new = [s for s in awaited if s not in self._said]
        if not new:
            return
        self._said.update(new)
        logger.info(
            "receiver of rank %d: rank 0 says the study has ended, but %s: this rank "
            "waits for rank 0's launcher to run it again, give it up or fail the study "
            "(bounded by stall_timeout)",
            self.rank,
            "; ".join(f"simulation {s} {self._again(s)} ({ingest.describe(s)})" for s in new),
        )

    def _again(self, s: int) -> str:
        """Why simulation `s` is awaited, in words."""
        if self._guard is not None and self._guard.failed_now(s):
            return "was refused here, its failure handed to rank 0"
        return "said HELLO again after the notice"
