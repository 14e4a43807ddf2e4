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

from melissa_trainer.wire.messages import StudyEnd

if TYPE_CHECKING:
    from melissa_trainer.stream.ingest import Ingest

__all__ = ["StudyEndCheck", "StudyLacksError"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: how many lacked simulations the error describes one by one
_SHOWN = 8


class StudyLacksError(RuntimeError):
    """The study has ended and this rank lacks the data of simulations whose process
    ended with exit 0 (module docstring); the message names them, the rank and the fix."""


class StudyEndCheck:
    """A receiver's record of the STUDY_END it read (`told`), and the judgment made at
    each empty poll once `grace` idle seconds have passed since it (`check`)."""

    def __init__(self, rank: int, grace: float) -> None:
        self.rank, self.grace = rank, grace
        #: the ids whose process ended with exit 0, once told (None: not told)
        self.finished: list[int] | None = None

    def told(self, msg: StudyEnd, ended: bool) -> None:
        """Record `msg` (the first one only); nothing once the stream has `ended`."""
        if self.finished is not None or ended:
            return
        self.finished = [int(s) for s in msg.finished]
        logger.info(
            "receiver of rank %d: rank 0 says the study has ended (%d simulations ended with "
            "exit 0); this rank's stream ends or fails after %g s of silence",
            self.rank,
            len(self.finished),
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
        lacked = self.lacked(ingest)
        n = len(self.finished)
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
