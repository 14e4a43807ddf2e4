"""What a receiver tells of its simulations to any thread (`ReceiverQueries`, a base of
`Receiver`): the launcher's heartbeat and start-up (`activity`, `first_message_at`,
`client_of`, `backpressured`, `idle_seconds`), a study's account of the simulations
completed or refused (`completed`, `refused`, `finished_simulations`, `waiting_for`),
its telemetry, and the words of its error messages (`describe`).

Contract: every method reads and never changes the receiver's state; each may be called
from any thread while the ingester runs (a best-effort read, taken without the ingest
lock), and none blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the attributes `IngestLoop` sets
    from melissa_trainer.stream.feeder import Feeder
    from melissa_trainer.stream.ingest import Ingest
    from melissa_trainer.stream.watchdog import IdleClock

__all__ = ["ReceiverQueries"]


class ReceiverQueries:
    """The read-only queries of a `Receiver` (module docstring), on the `ingest`,
    `_idle` clock and `_feeder` its `IngestLoop` sets."""

    ingest: Ingest
    _idle: IdleClock
    _feeder: Feeder

    def finished_simulations(self) -> list[int]:
        """Ids of the simulations that finished here, in the order they finished."""
        return self.completed()

    def telemetry(self) -> dict[str, float]:
        """Cumulative counters, always the keys of `telemetry_keys()`."""
        return self.ingest.telemetry()

    def activity(self) -> dict[int, int]:
        """Simulation id -> DATA messages received so far: the launcher's heartbeat."""
        return self.ingest.activity()

    def first_message_at(self, simulation_id: int) -> float | None:
        """`time.monotonic()` when the simulation's first DATA message arrived here (None
        before it, or for a simulation known from a checkpoint only): the launcher's
        exact start-up of its first attempt. Any thread."""
        return self.ingest.first_message_at(simulation_id)

    def client_of(self, simulation_id: int) -> str | None:
        """The client library the simulation's HELLO named ("python", "c": C or Fortran),
        None when unknown: what the launcher's start-up advice depends on. Any thread."""
        return self.ingest.client_of(simulation_id)

    def completed(self, start: int = 0) -> list[int]:
        """Ids of the simulations whose every step reached the buffer here, in the
        order they did, from the `start`-th on (`finished_simulations`; any thread)."""
        return self.ingest.finished_ids[start:]

    def refused(self, start: int = 0) -> list[tuple[int, str]]:
        """(simulation id, why) of every HELLO refused here, and of every simulation
        failed here for non-finite data, in order, from the `start`-th on (any thread)."""
        return self.ingest.refused[start:]

    def idle_seconds(self) -> float:
        """Seconds since a message last arrived, while the socket is found empty: 0
        while messages flow, and while the receiver waits for room in the buffer (no
        empty poll then). Any thread."""
        return self._idle.idle_seconds(self.ingest.messages)

    def backpressured(self) -> bool:
        """True while the receiver waits for room in the buffer (what it took in waits
        for the reader): the simulations' silence is then the trainer's, not theirs
        (the launcher's `simulation_timeout` does not count it). Any thread."""
        feeder = self._feeder
        return feeder.waiting or bool(feeder.overflow)

    def describe(self, simulation_id: int) -> str:
        """What this receiver has of a simulation, for error messages (any thread:
        a best-effort read)."""
        return self.ingest.describe(simulation_id)

    def waiting_for(self) -> list[int]:
        """Simulations that said HELLO here and have not finished (any thread: a
        best-effort read)."""
        return self.ingest.unfinished()
