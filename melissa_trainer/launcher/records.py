"""The bookkeeping of a study: which simulations exist, their state, what runs next.

`Study` knows nothing of processes, threads or clocks (times are passed in): the
launcher calls it under its lock, and it is what the launcher's checkpoint state holds.

Ids: `first_simulation_id` for the first parameter set drawn, +1 per draw. A restart
keeps its id and parameters; a redraw is a new draw, so a new id (a failed id is never
reused). The goal is `n_simulations` *successful* simulations: new ones are drawn while
finished + abandoned + running + pending < `n_simulations`.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from melissa_trainer.launcher.samplers import Sampler

__all__ = ["ON_FAILURE", "STATE_VERSION", "STATUSES", "SimulationRecord", "Study"]

STATE_VERSION = 1
STATUSES = ("pending", "running", "finished", "failed", "abandoned")
#: What happens to a simulation that failed `max_restarts` + 1 times.
ON_FAILURE = ("redraw", "abandon", "raise")
_ACTIVE = ("pending", "running", "finished", "abandoned")  # count towards n_simulations


@dataclass
class SimulationRecord:
    """One simulation id: its parameters and history.

    Attributes:
        status: one of `STATUSES` ("failed": given up and replaced by a redraw, or the
            failure that ended the study).
        restarts: restarts after a failure.
        attempts: launches so far (the next launch's ``MELISSA_TRAINER_ATTEMPT``).
        exit_codes: one per ended attempt: the exit code, or "timeout" for a
            simulation killed for silence.
        seconds: wall time of its ended attempts.
        started: when the current attempt started (the launcher's monotonic clock; not
            saved).
    """

    parameters: dict[str, float]
    status: str = "pending"
    restarts: int = 0
    attempts: int = 0
    exit_codes: list[int | str] = field(default_factory=list)
    seconds: float = 0.0
    started: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": dict(self.parameters),
            "status": self.status,
            "restarts": self.restarts,
            "attempts": self.attempts,
            "exit_codes": list(self.exit_codes),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SimulationRecord:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown simulation status {status!r}")
        return cls(
            parameters={str(k): float(v) for k, v in data["parameters"].items()},
            status=status,
            restarts=int(data["restarts"]),
            attempts=int(data.get("attempts", len(data["exit_codes"]))),
            exit_codes=[c if isinstance(c, str) else int(c) for c in data["exit_codes"]],
            seconds=float(data["seconds"]),
        )


class Study:
    """The records of a study and its failure policy (see the module docstring).

    Not thread-safe: the launcher serializes every call with its lock.
    """

    def __init__(
        self,
        sampler: Sampler,
        n_simulations: int,
        *,
        max_restarts: int,
        on_failure: str,
        max_redraws: int,
        first_simulation_id: int,
    ) -> None:
        self.sampler = sampler
        self.n_simulations = n_simulations
        self.max_restarts, self.on_failure, self.max_redraws = max_restarts, on_failure, max_redraws
        self.records: dict[int, SimulationRecord] = {}
        self.queue: deque[int] = deque()  # pending ids, in launch order
        self.next_id = first_simulation_id
        self.redraws = 0

    # -- decisions ----------------------------------------------------------------------

    def counts(self) -> Counter[str]:
        return Counter(r.status for r in self.records.values())

    def work_left(self) -> int:
        """Simulations still to start: queued ones plus those not drawn yet."""
        counts = self.counts()
        undrawn = self.n_simulations - sum(counts[s] for s in _ACTIVE)
        return len(self.queue) + max(0, undrawn)

    @property
    def done(self) -> bool:
        """Nothing runs and nothing is left to start."""
        return self.work_left() == 0 and not any(
            r.status == "running" for r in self.records.values()
        )

    def take(self, now: float) -> int | None:
        """The simulation to launch now (marked running), or None if there is none.

        Raises:
            SamplerExhausted: a new parameter set was needed and the sampler has none.
        """
        if self.queue:
            sid = self.queue.popleft()
        elif self.work_left() > 0:
            parameters = self.sampler.draw()
            sid, self.next_id = self.next_id, self.next_id + 1
            self.records[sid] = SimulationRecord(parameters)
        else:
            return None
        record = self.records[sid]
        record.status, record.started = "running", now
        record.attempts += 1
        return sid

    def succeeded(self, sid: int, now: float, code: int | str = 0) -> None:
        record = self._end(sid, now, code)
        record.status = "finished"

    def failed(self, sid: int, now: float, code: int | str) -> str:
        """Record a failed attempt; returns what to do: "restart" (queued again),
        "redraw" (given up, a replacement will be drawn), "abandon" or "raise"."""
        record = self._end(sid, now, code)
        if record.restarts < self.max_restarts:
            record.restarts += 1
            record.status = "pending"
            self.queue.appendleft(sid)  # before new draws: its data is partly there
            return "restart"
        if self.on_failure == "abandon":
            record.status = "abandoned"
            return "abandon"
        record.status = "failed"
        if self.on_failure == "redraw" and self.redraws < self.max_redraws:
            self.redraws += 1
            return "redraw"
        return "raise"

    def _end(self, sid: int, now: float, code: int | str) -> SimulationRecord:
        record = self.records[sid]
        if record.status != "running":
            raise RuntimeError(f"simulation {sid} is {record.status}, not running")
        if record.started is not None:
            record.seconds += max(0.0, now - record.started)
        record.started = None
        record.exit_codes.append(code)
        return record

    # -- reports and state --------------------------------------------------------------

    def summary(self, now: float) -> dict[str, float]:
        counts = self.counts()
        running_time = sum(now - r.started for r in self.records.values() if r.started is not None)
        undrawn = max(0, self.n_simulations - sum(counts[s] for s in _ACTIVE))
        return {
            "finished": counts["finished"],
            "running": counts["running"],
            "pending": counts["pending"] + undrawn,
            "failed": counts["failed"],
            "abandoned": counts["abandoned"],
            "restarts": sum(r.restarts for r in self.records.values()),
            "redraws": self.redraws,
            "simulation_seconds": sum(r.seconds for r in self.records.values()) + running_time,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "sampler": self.sampler.state_dict(),
            "next_id": self.next_id,
            "simulations": {str(sid): r.to_json() for sid, r in self.records.items()},
            "redraws": self.redraws,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore; simulations that were running are queued to run again.

        Raises:
            ValueError: an unknown version, or records that do not fit this sampler.
        """
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unknown launcher state version {state.get('version')!r}")
        try:
            records = {
                int(k): SimulationRecord.from_json(v) for k, v in state["simulations"].items()
            }
            next_id, redraws = int(state["next_id"]), int(state["redraws"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid launcher state: {exc!r}") from exc
        names = set(self.sampler.names)
        for sid, record in records.items():
            if set(record.parameters) != names or not all(
                math.isfinite(v) for v in record.parameters.values()
            ):
                raise ValueError(
                    f"simulation {sid} in the launcher state has parameters "
                    f"{record.parameters}, not finite values of {sorted(names)}"
                )
            if sid >= next_id:
                raise ValueError(f"simulation {sid} in the launcher state is >= next_id {next_id}")
        self.sampler.load_state_dict(state["sampler"])
        self.records, self.next_id, self.redraws = records, next_id, redraws
        for record in records.values():
            if record.status == "running":  # interrupted: run it again (not a failure)
                record.status = "pending"
        self.queue = deque(sorted(s for s, r in records.items() if r.status == "pending"))
