"""The roll call a `wait_watch.WaitWatch` may share among ranks (`RollCall`; the
launcher's store: `trainer.roll_call.StoreRollCall`), and how often the ranks' looks ask
it (`roll_look`): every held rank's look is one request to one host's store, so their
pace is set by the number of ranks, not by each rank alone."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ROLL_LOOK", "STORE_RATE", "RollCall", "roll_look"]

#: seconds between two looks of a watch with a roll call up to 1,024 ranks (`first` / 4
#: if sooner; more ranks: `roll_look`):
#: a rank held in a collective that another rank will never join (rank 0 refused alone,
#: and waits up to 15 s for its mark's reads: `trainer.refusal_mark`) reads the mark
#: within it (`RollCall.held`), or in a step's (DDP's backward). A look that finds no
#: wait, or a span whose steps moved, costs a lock, no request; one during a wait or a
#: step longer than a look, one request to the launcher's store per rank (the mark), so
#: that the looks of many ranks are spaced further (`STORE_RATE`, `roll_look`)
ROLL_LOOK = 0.5
#: at most, requests a second that every rank's looks together make to the store: with
#: more than ``STORE_RATE * ROLL_LOOK`` ranks (1,024) the looks space out, one every
#: ``world / STORE_RATE`` s (2 s at 4,096 ranks). At 8,192 requests a second (4,096 ranks
#: every 0.5 s) the store's host spent 9.3% of a core quiet, 14.3% with other processes
#: busy on its cores; at 2,048, 3.0% and 4.7% (`benchmarks/store_traffic.py`)
STORE_RATE = 2048.0


def roll_look(world: int) -> float:
    """Seconds between two looks of a watch with a roll call among `world` ranks:
    `ROLL_LOOK`, or longer where all the ranks' looks at once would ask the store more
    than `STORE_RATE` times a second. Rank 0, refusing alone, waits for a held rank's
    read about one look (at most `trainer.refusal_mark.READ_WAIT`)."""
    return max(ROLL_LOOK, world / STORE_RATE)


class RollCall(Protocol):
    """Where each rank's waits are, shared between ranks (`WaitWatch.roll`). Called from
    the watch's thread only; never raises (an unreachable store: None from `late`).
    `world`: the number of ranks (their looks together space out: `roll_look`)."""

    world: int

    def arrived(self, wait: int) -> None:
        """This rank is at its wait number `wait` (its count of waits begun)."""

    def late(self, wait: int) -> list[int] | None:
        """The other ranks not seen at wait number `wait` or later; None: unknown."""

    def held(self) -> None:
        """At each look that finds a wait in progress, or a span of steps whose step
        count did not move since the look before (every `roll_look` s): the
        roll call may read what the other ranks leave for a rank held in a collective
        (rank 0's refusal mark: `trainer.roll_call`)."""
