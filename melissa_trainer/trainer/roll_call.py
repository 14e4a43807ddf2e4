"""`StoreRollCall`: where each rank's waits are, in the launcher's store, so that a rank
held in a collective names the ranks likely late (`core.wait_watch.RollCall`).

The store is ``accelerate launch``'s (torch elastic's agent ``TCPStore``,
``TORCHELASTIC_USE_AGENT_STORE``: `refusal_mark.launch_store`), hosted by the launcher,
not by a rank: a stopped or hung rank does not stop it. Each rank keeps one counter,
``melissa_trainer/wait_watch/<run>/<restart>/<trainer>/<rank>``, the number of the wait
its watch saw last (raised with ``add``). At its first connection a rank creates every
rank's counter (``add(key, 0)``, which does not block on a key not yet written, as
``get`` does), so that a warning reads them all in one request (``multi_get``). Only the
watch's thread talks to it, only while a wait lasts (a look of the watch that finds one
in progress): never the training thread, which only closes the connection (`close`, at
the end of `train()`; the next wait connects again).

``<trainer>`` tells the trainers of one process apart (a second trainer read the first
one's counts): the number of roll calls made before for the same rank in this process,
the same on every rank when each rank makes the same trainers, as a script does.

Without such a store (``python train.py``, another launcher: rank 0 may host the
process group's store, and a stopped rank 0 would hold a look at it) the trainer has no
roll call, and the warnings name no rank. A store that does not answer (within
`refusal_mark.CONNECT_TIMEOUT`, its answers within `STORE_TIMEOUT`) ends the roll call: said
once, at INFO.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter

from melissa_trainer.trainer.refusal_mark import StoreLink, launch_store, read_if_left

__all__ = ["StoreRollCall", "close_roll", "launch_roll_call"]

logger = logging.getLogger(__name__)

_PREFIX = "melissa_trainer/wait_watch"
_made: Counter[int] = Counter()  # roll calls made in this process, per rank (`<trainer>`)


class StoreRollCall:
    """`core.wait_watch.RollCall` in the launcher's store (`link`), for `rank` of `world`
    ranks. Connects at its first use (`launch_roll_call` makes none)."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        run = os.environ.get("TORCHELASTIC_RUN_ID", "")
        # (a restart of the workers by the same agent, same store, must not read old counts)
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self._prefix = f"{_PREFIX}/{run}/{restart}/{_made[rank]}"
        _made[rank] += 1
        self._lock = threading.Lock()  # (the watch's thread uses the link, `close` drops it)
        self._link: StoreLink | None = None
        self._broken = False  # the store could not be reached: no roll call any more
        self._told = 0  # the count this rank's key holds
        self._refusal_read = False  # rank 0's refusal mark read, and told (`held`)

    def _key(self, rank: int) -> str:
        return f"{self._prefix}/{rank}"

    def _store(self) -> StoreLink | None:
        if self._broken:
            return None
        if self._link is None:
            link = launch_store()
            if not isinstance(link, StoreLink):
                self._stop(f"the launcher's store is {link or 'absent'}")
                return None
            try:  # every rank's counter, so that `late`'s multi_get finds them all
                for r in range(self.world):
                    link.store.add(self._key(r), 0)
            except (RuntimeError, OSError) as exc:  # (torch's DistError is a RuntimeError)
                link.close()
                self._stop(f"{type(exc).__name__}: {exc}")
                return None
            self._link = link
        if self._link.gone():
            self._stop("the launcher's store has gone")
            return None
        return self._link

    def _stop(self, why: str) -> None:
        self._broken = True
        logger.info("rank %d's wait watch names no late rank any more: %s", self.rank, why)

    def arrived(self, wait: int) -> None:
        with self._lock:
            link = self._store()
            if link is None or wait <= self._told:
                return
            try:
                link.store.add(self._key(self.rank), wait - self._told)
            except (RuntimeError, OSError) as exc:  # (torch's DistError is a RuntimeError)
                self._stop(f"{type(exc).__name__}: {exc}")
                return
            self._told = wait

    def late(self, wait: int) -> list[int] | None:
        with self._lock:
            link = self._store()
            if link is None:
                return None
            try:  # (one request: the counters exist, `_store` made them)
                got = link.store.multi_get([self._key(r) for r in range(self.world)])
                seen = [int(value) for value in got]
            except (RuntimeError, OSError, ValueError) as exc:
                self._stop(f"{type(exc).__name__}: {exc}")
                return None
        return [r for r, at in enumerate(seen) if r != self.rank and at < wait]

    def held(self) -> None:
        """A look during a wait: rank 0's refusal mark, once there, read and told to
        rank 0 (`refusal_mark.read_if_left`), once: rank 0, refusing alone, exits
        then, its launcher ending this rank (or the collective failing as rank 0 goes)."""
        with self._lock:
            if self._refusal_read:
                return
            link = self._store()
            if link is None:
                return
            try:
                self._refusal_read = read_if_left(link)
            except (RuntimeError, OSError) as exc:  # (torch's DistError is a RuntimeError)
                self._stop(f"{type(exc).__name__}: {exc}")
                return
        if self._refusal_read:  # (its line is rank 0's: this rank says why it waits on)
            logger.info(
                "rank %d: rank 0 said a refusal (its line), and this rank waits in a "
                "collective that rank 0 will not join: its launcher ends it, or the "
                "collective's failure as rank 0 exits (status 2, quiet, inside "
                "refusals_end_the_program)",
                self.rank,
            )

    def close(self) -> None:
        """Close the connection to the store (its two sockets), if any; the next use
        connects again. From any thread."""
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()


def launch_roll_call(rank: int, world: int) -> StoreRollCall | None:
    """The roll call of `rank` of `world` ranks under a launcher with an agent store
    (``TORCHELASTIC_USE_AGENT_STORE``); None otherwise (one process, another launcher).
    Makes no connection: the watch's thread does, at the first wait that lasts."""
    if world <= 1 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    return StoreRollCall(rank, world)


def close_roll(roll: object) -> None:
    """Close `roll`'s connection if it is a `StoreRollCall` (the trainer's, at the end of
    `train()`: its two sockets are not kept while nothing waits)."""
    if isinstance(roll, StoreRollCall):
        roll.close()
