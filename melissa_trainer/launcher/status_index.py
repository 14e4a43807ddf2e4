"""`StatusIndex`: the ids of a study's simulations in each status, and the totals that
its summary reports, kept up to date with the records.

The launcher asks whether the study is done every tick and for its summary at every
log, under its lock; a scan of every record would make a tick O(simulations drawn)
(quadratic over a study; docs/measured.md). So `StudyRecord` changes a record's status
only through `move`, which keeps the index, and its totals (restarts, seconds of the
ended attempts) only through `restarted`, `stopwatch` and `forget`; after a load it
rebuilds the index from the records (`rebuild`). Reads are O(1) (`count`) or O(the ids
read) (`ids`).

Not thread-safe: the launcher calls the record under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from melissa_trainer.launcher.simulation_record import STATUSES, SimulationRecord

__all__ = ["StatusIndex"]


class StatusIndex:
    """The ids in each of `STATUSES` and the records' summed restarts and seconds."""

    def __init__(self) -> None:
        self._ids: dict[str, set[int]] = {status: set() for status in STATUSES}
        #: the sum of the records' restarts
        self.restarts = 0
        #: the sum of the records' seconds (their ended attempts)
        self.seconds = 0.0

    # -- reads ----------------------------------------------------------------------------

    def counts(self) -> Counter[str]:
        """Simulations per status. O(1)."""
        return Counter({status: len(ids) for status, ids in self._ids.items()})

    def count(self, *statuses: str) -> int:
        """Simulations in any of `statuses`. O(1)."""
        return sum(len(self._ids[status]) for status in statuses)

    def ids(self, status: str) -> list[int]:
        """The ids in `status`, in no particular order (O(their number))."""
        return list(self._ids[status])

    # -- changes --------------------------------------------------------------------------

    def add(self, sid: int, record: SimulationRecord) -> None:
        """A new record, in its status (no totals yet: a new one has none)."""
        self._ids[record.status].add(sid)

    def move(self, sid: int, record: SimulationRecord, status: str) -> None:
        """Set the status of `record` (of `sid`, indexed), keeping the index."""
        self._ids[record.status].discard(sid)
        self._ids[status].add(sid)
        record.status = status

    def restarted(self, record: SimulationRecord) -> None:
        """Count one more restart of `record`."""
        record.restarts += 1
        self.restarts += 1

    def stopwatch(self, record: SimulationRecord, now: float) -> None:
        """An attempt's process ended: add its wall time to the record and the total."""
        if record.started is not None:
            elapsed = max(0.0, now - record.started)
            record.seconds += elapsed
            self.seconds += elapsed
        record.started = None

    def forget(self, sid: int, record: SimulationRecord) -> None:
        """`sid` leaves the study (its record dropped): it and its totals go."""
        self._ids[record.status].discard(sid)
        self.restarts -= record.restarts
        self.seconds -= record.seconds

    def rebuild(self, records: Mapping[int, SimulationRecord]) -> None:
        """The index and totals of `records` (after a load)."""
        self._ids = {status: set() for status in STATUSES}
        for sid, record in records.items():
            self._ids[record.status].add(sid)
        self.restarts = sum(r.restarts for r in records.values())
        self.seconds = sum(r.seconds for r in records.values())
