"""A receiver's word with the other ranks' receivers about simulations failed for NaN or
Inf under ``nonfinite="fail"`` with a launcher (`melissa_trainer.stream.nonfinite`):
rank 0's failures said to the other ranks (`nonfinite_kills`), and theirs handed to
rank 0 for its launcher (`nonfinite_handoff`). `IngestLoop` holds one.

Contract: built with the receiver's `Ingest`, it wires that ingest's `nonfinite` on a
rank other than 0 (its failures handed to rank 0, rank 0's kills heard at a HELLO);
`report_to_launcher` switches rank 0's ingest to listing failures for its launcher and
starts hearing the others' hand-offs; `hear` (called by the ingester only, holding the
ingest) fails each hand-off's simulation for the launcher once its HELLO was read here.
Where no word is kept (one rank, no rendezvous directory, another `nonfinite` mode)
`kills` and `handoff` are None and nothing is said or heard.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.nonfinite_handoff import HEAR_EVERY, NonfiniteHandoff
from melissa_trainer.stream.nonfinite_kills import NonfiniteKills
from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["NonfiniteRanks"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages


class NonfiniteRanks:
    """The word about failures for NaN or Inf between rank `rank`'s receiver and the
    others' (module docstring). Not thread-safe: the ingester's (`hear`) and, before
    the simulations start, the study's (`report_to_launcher`)."""

    def __init__(self, config: ReceiverConfig, rank: int, world_size: int, ingest: Ingest) -> None:
        self._rank, self._ingest = rank, ingest
        #: rank 0's word to the other ranks of the simulations its receiver failed for
        #: NaN or Inf (`nonfinite_kills`; None where no other rank needs it): told on rank
        #: 0 (`report_to_launcher`), read on the others (`heard_kills`)
        self.kills = NonfiniteKills.for_receiver(
            config.rendezvous_dir, config.run_id, world_size, config.nonfinite
        )
        #: the other ranks' failures for NaN or Inf, handed to rank 0 for its launcher
        #: (`nonfinite_handoff`; None where there is none): rank 0 hears them once it
        #: `report_to_launcher` (`hear`), the others hand theirs
        self.handoff = NonfiniteHandoff.for_receiver(
            config.rendezvous_dir, config.run_id, rank, world_size, config.nonfinite
        )
        if self.handoff is not None and rank != 0:
            ingest.nonfinite.hand = self.handoff.hand
            if self.kills is not None:  # (the same conditions: always)
                ingest.nonfinite.heard_kills = self.kills.failures
        self._hearing = False  # rank 0: a launcher reads `refused`, and others hand theirs
        self._next_hearing = -math.inf
        #: hand-offs of attempts whose HELLO this rank has not read yet (`hear`)
        self._held: list[tuple[int, int, int, int, str]] = []

    def report_to_launcher(self) -> None:
        """A launcher reads `refused` (`IngestLoop.report_refusals_to_launcher`): list a
        failure there, say rank 0's to the other ranks, and hear theirs on rank 0."""
        self._ingest.nonfinite.launcher = True
        if self.kills is not None:
            self._ingest.nonfinite.announce = self.kills.announce
        if self.handoff is not None and self._rank == 0:
            self.handoff.listen()
            self._hearing = True

    @property
    def heard_kills(self) -> Callable[[int], int] | None:
        """On a rank other than 0, rank 0's count of failures for NaN or Inf of a
        simulation (`NonfiniteKills.failures`, for its `ConnectionWatch`); None on rank
        0 (its own ledger tells) and where no word is kept (`kills`)."""
        kills = self.kills
        return None if kills is None or self._rank == 0 else kills.failures

    def hear(self, now: bool = False) -> None:
        """Rank 0, once it hears: fail, for the launcher, each simulation another rank
        handed here (`handoff`), at empty polls, pumps and blocked puts (a held rank 0
        too); at most every `HEAR_EVERY` s unless `now` (before a HELLO)."""
        handoff = self.handoff
        if not self._hearing or handoff is None:
            return
        clock = time.monotonic()
        if not now and clock < self._next_hearing:
            return
        self._next_hearing = clock + HEAR_EVERY
        ing = self._ingest
        handed, self._held = [*self._held, *handoff.heard()], []
        for sid, t, seen, attempt, why in handed:
            if not ing.nonfinite.helloed(sid, attempt):  # (held until its HELLO: `helloed`)
                self._held.append((sid, t, seen, attempt, why))
            elif ing.nonfinite.failed_elsewhere(ing.sims.get(sid), sid, t, why, seen):
                logger.info("simulation %d failed: %s; reported to the launcher", sid, why)
