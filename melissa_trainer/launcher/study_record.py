"""The record of a study: one record per simulation, its state, what runs next.

`StudyRecord` is the one owner of every simulation's state. The launcher's supervisor reports
what happens to processes (started, exited, killed) and the receivers report what
happens to data (all of a simulation's steps reached the buffer; its HELLO was refused);
both report here, and the checkpoint saves this object once (rank 0's launcher state).
It knows nothing of processes, threads or clocks (times are passed in): the launcher
calls it under its lock.

A simulation's states::

                 take()              exit 0                 data complete
      pending ──────────▶ running ───────────▶ exited ─────────────────────▶ finished
         ▲                 │   │                  │                             ▲
         │                 │   └─ data complete ─▶ complete ── process ends ────┘
         │    restart      │                      │ (any exit code)
         └─────────────────┴── attempt failed ◀───┘ (its data never completed)
                                   │ restarts used up
                                   ▼
                    failed (redrawn: a new id replaces it) | abandoned | the study raises

* **pending**: queued to run (a first run, or a restart: `restarts` > 0).
* **running**: its process is alive, its data incomplete.
* **complete**: every step it sent reached the buffer; its process has not exited yet.
* **exited**: its process exited 0, but its data has not all reached the buffer yet
  (still queued in ZeroMQ, behind a full buffer, or lost). If it never completes, the
  attempt failed: "exit 0" alone is never success.
* **finished**: its data is complete *and* its process ended. Only this counts as done.
* **failed**: given up after `max_restarts` restarts and replaced by a redraw (a new id,
  new parameters; a failed id is never reused).
* **abandoned**: given up (``on_failure="abandon"``); the study goes on without it.

Without a data report (a `Launcher` used on its own) "exit 0" is all there is to go by:
an exiting simulation goes straight to finished.

Ids: `first_simulation_id` for the first parameter set drawn, +1 per draw. A restart
keeps its id and parameters. The goal is `n_simulations` *finished* simulations: new
ones are drawn while the active ones (all but failed) number fewer.

Failure budget: at most ``n_simulations - ceil(min_finished_fraction * n_simulations)``
simulations may be given up (failed or abandoned) in a study; the next one makes the
study fail (`StudyFailed`), so a study where every simulation fails stops after a
bounded number of tries with an error, never with "success" and an untrained model.

On resume (`load_state_dict` then `reconcile`), a simulation is finished only if every
receiver's checkpointed record has all its data; every other one that was running,
complete, exited or finished runs again (the receivers' exactly-once dedup drops what
they already have).

The module is over 400 lines on purpose: the transitions, the index of ids by status
that each must update (`_move`) and the checkpoint that rebuilds it are one invariant;
spread over modules, a new transition could forget the index.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any

from melissa_trainer.common.migrations import CURRENT
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.samplers import Sampler
from melissa_trainer.launcher.simulation_record import (
    STATUSES,
    SavedStudy,
    SimulationRecord,
    columns,
    read_saved,
    records_from,
    records_of,
)
from melissa_trainer.launcher.study_change import past_the_end, settings_of

__all__ = [
    "ON_FAILURE",
    "STATE_VERSION",
    "STATUSES",
    "SimulationRecord",
    "StudyRecord",
    "StudyFailed",
    "records_from",
    "records_of",
]

#: 3: the records as columns (one list per attribute: 10^5 simulations save and load
#: in a fraction of a second, where one JSON object each took seconds); 2: the states
#: "complete" and "exited" (version 1 recorded "finished" on exit 0). The migrations of
#: earlier versions: `checkpoint_migrations` ("launcher").
STATE_VERSION = CURRENT["launcher"]
#: What happens to a simulation that failed `max_restarts` + 1 times.
ON_FAILURE = ("redraw", "abandon", "raise")
_ACTIVE = ("pending", "running", "complete", "exited", "finished", "abandoned")
_ALIVE = ("running", "complete")  # a process exists
_WAITED = ("pending", "running", "complete", "exited")  # the study waits for these


class StudyFailed(RuntimeError):
    """The study cannot reach its goal (the message says why and lists the failures)."""


class StudyRecord:
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
        min_finished_fraction: float = 0.5,
    ) -> None:
        self.sampler = sampler
        self.n_simulations = n_simulations
        self.max_restarts, self.on_failure, self.max_redraws = max_restarts, on_failure, max_redraws
        self.min_finished_fraction = min_finished_fraction
        #: simulations that may be given up before the study fails
        self.max_given_up = max(0, n_simulations - math.ceil(min_finished_fraction * n_simulations))
        #: True when receivers report data ("exited" until then); False: exit 0 finishes
        self.data_reported = False
        self.records: dict[int, SimulationRecord] = {}
        # The ids in each status, and the totals `summary` reports, kept up to date by
        # `_move` (every status change goes through it): the launcher asks `done` every
        # tick and `summary` at every log, and a scan of every record would make a tick
        # O(simulations drawn) under the lock (quadratic over a study; docs/measured.md).
        self._ids: dict[str, set[int]] = {status: set() for status in STATUSES}
        self._restarts = 0  # sum of the records' restarts
        self._seconds = 0.0  # sum of the records' seconds (ended attempts)
        self.queue: deque[int] = deque()  # pending ids, in launch order
        self.next_id = first_simulation_id
        self.redraws = 0
        #: why the last outcome "raise" was returned: the policy or the budget used up
        self.failure = ""
        #: losses noted by `observe`, not yet given to the sampler (id -> loss, in the
        #: order of their newest report)
        self._unapplied: dict[int, float] = {}

    # -- decisions ----------------------------------------------------------------------

    def counts(self) -> Counter[str]:
        """Simulations drawn, per status (O(1): see `_move`)."""
        return Counter({status: len(ids) for status, ids in self._ids.items()})

    def ids(self, status: str) -> list[int]:
        """The ids in `status`, in no particular order (O(their number))."""
        return list(self._ids[status])

    def observe(self, losses: Mapping[int, float]) -> tuple[int, list[int]]:
        """Note each simulation's loss for the adaptive sampler; returns how many were
        noted and the ids skipped: a non-finite loss (a diverged simulation steers
        nothing) or an id this study never drew.

        The sampler is given them later, with their parameters (`apply_observations`):
        before its next draw, in `state_dict`, and when the launcher stops. A study's
        trainer reports every simulation's loss every few steps, hundreds of times per
        draw; only the newest of each matters to the next draw, so the sampler observes
        each simulation once per draw instead of once per report (issue 46: its cost on
        the training thread). The sampler's state is the same as if each had been
        observed at once: its observations keep the newest loss of each simulation, in
        the order of their newest report (`AdaptiveSampler.observe`).

        Raises:
            TypeError: the sampler is not an `AdaptiveSampler`.
            ValueError: a loss that is not a number (nothing is noted then).
        """
        if not isinstance(self.sampler, AdaptiveSampler):
            raise TypeError(
                f"the study's sampler ({type(self.sampler).__name__}) is not adaptive: it "
                "observes no losses (make_sampler('breed', ...) is)"
            )
        for sid, loss in losses.items():
            if isinstance(loss, bool) or not isinstance(loss, numbers.Real):
                raise ValueError(f"the loss of simulation {sid} is not a number: {loss!r}")
        observed, skipped = 0, []
        for sid, loss in losses.items():
            if sid not in self.records or not math.isfinite(loss):
                skipped.append(sid)
                continue
            self._unapplied.pop(sid, None)  # reported again: the newest again
            self._unapplied[sid] = float(loss)
            observed += 1
        return observed, skipped

    def apply_observations(self) -> None:
        """Give the adaptive sampler the losses `observe` noted since the last call, in
        the order they were noted (a no-op for a fixed design)."""
        if not self._unapplied:
            return
        sampler = self.sampler
        assert isinstance(sampler, AdaptiveSampler)  # (`observe` checked it)
        for sid, loss in self._unapplied.items():
            sampler.observe(sid, self.records[sid].parameters, loss)
        self._unapplied.clear()

    def awaiting_data(self) -> int:
        """Simulations whose process ended with their data not all in yet ("exited"):
        they hold a job slot (see `Supervisor.launch_jobs`). O(1)."""
        return len(self._ids["exited"])

    def work_left(self) -> int:
        """Simulations still to start: queued ones plus those not drawn yet."""
        counts = self.counts()
        undrawn = self.n_simulations - sum(counts[s] for s in _ACTIVE)
        return len(self.queue) + max(0, undrawn)

    @property
    def done(self) -> bool:
        """Nothing runs, nothing waits for its data and nothing is left to start."""
        return self.work_left() == 0 and not any(self._ids[status] for status in _WAITED)

    def take(self, now: float) -> int | None:
        """The simulation to launch now (marked running), or None if there is none.

        Raises:
            SamplerExhausted: a new parameter set was needed and the sampler has none.
        """
        if self.queue:
            sid = self.queue.popleft()
        elif self.work_left() > 0:
            self.apply_observations()  # the draw sees every loss reported so far
            parameters = self.sampler.draw()
            sid, self.next_id = self.next_id, self.next_id + 1
            self.records[sid] = SimulationRecord(parameters)
            self._ids["pending"].add(sid)
        else:
            return None
        record = self.records[sid]
        self._move(sid, "running")
        record.started = now
        record.attempts += 1
        return sid

    def process_ended(self, sid: int, now: float, code: int | str) -> str:
        """Record the end of an attempt's process; returns what happens next: "finished",
        "exited" (exit 0, waiting for its data), or the failure policy's outcome (see
        `attempt_failed`)."""
        record = self.records[sid]
        if record.status not in _ALIVE:
            raise RuntimeError(f"simulation {sid} is {record.status}, not running")
        self._stopwatch(record, now)
        record.exit_codes.append(code)
        if record.status == "complete":  # its data is all there, whatever the exit code
            self._move(sid, "finished")
            return "finished"
        if code == 0:
            if not self.data_reported:
                self._move(sid, "finished")
                return "finished"
            self._move(sid, "exited")
            record.exited_at = now
            return "exited"
        return self.attempt_failed(sid)

    def interrupted(self, sid: int, now: float) -> None:
        """Its process was killed by the launcher's stop (not a failure): pending again,
        or finished if its data was complete."""
        record = self.records[sid]
        if record.status not in _ALIVE:
            return
        self._stopwatch(record, now)
        if record.status == "complete":
            self._move(sid, "finished")
        else:
            self._move(sid, "pending")
            self.queue.appendleft(sid)

    def data_complete(self, sid: int) -> bool:
        """The receivers have every step of `sid`; True if this changed its state."""
        record = self.records.get(sid)
        if record is None:
            return False
        if record.status == "running":
            self._move(sid, "complete")
        elif record.status in ("exited", "pending"):  # pending: a restart not needed after all
            if record.status == "pending" and sid in self.queue:
                self.queue.remove(sid)
            self._move(sid, "finished")
            record.exited_at = None
        else:
            return False
        return True

    def incomplete(self, sid: int, why: str, code: str = "incomplete") -> str:
        """An exited simulation whose data never completed (`code` "incomplete"), or
        that the receivers refused after it exited ("refused": its NaN under
        ``nonfinite="fail"``): a failed attempt."""
        record = self.records[sid]
        if record.status != "exited":
            raise RuntimeError(f"simulation {sid} is {record.status}, not exited")
        record.exit_codes[-1] = code
        record.exited_at, record.reason = None, why
        return self.attempt_failed(sid)

    def attempt_failed(self, sid: int) -> str:
        """Apply the failure policy to an ended, failed attempt; returns "restart"
        (queued again), "redraw" (given up, a replacement will be drawn), "abandon" or
        "raise" (the study fails: `failure` says why)."""
        record = self.records[sid]
        if record.restarts < self.max_restarts:
            record.restarts += 1
            self._restarts += 1
            self._move(sid, "pending")
            self.queue.appendleft(sid)  # before new draws: its data is partly there
            return "restart"
        given_up = len(self._ids["failed"]) + len(self._ids["abandoned"])
        self._move(sid, "failed")
        if self.on_failure == "raise":
            self.failure = "with LauncherTuning.on_failure='raise'"
        elif self.on_failure == "redraw" and self.redraws >= self.max_redraws:
            self.failure = (
                f"and the LauncherTuning.max_redraws={self.max_redraws} redraws are used up"
            )
        elif given_up >= self.max_given_up:
            self.failure = (
                f"and {given_up + 1} simulations failed for good, more than the "
                f"{self.max_given_up} that LauncherTuning.min_finished_fraction="
                f"{self.min_finished_fraction} allows in a study of {self.n_simulations}"
            )
        elif self.on_failure == "abandon":
            self._move(sid, "abandoned")
            return "abandon"
        else:
            self.redraws += 1
            return "redraw"
        return "raise"

    # -- reports and state --------------------------------------------------------------

    def summary(self, now: float) -> dict[str, float]:
        counts = self.counts()
        alive = (self.records[sid] for status in _ALIVE for sid in self._ids[status])
        running_time = sum(now - r.started for r in alive if r.started is not None)
        undrawn = max(0, self.n_simulations - sum(counts[s] for s in _ACTIVE))
        return {
            "finished": counts["finished"],
            "running": counts["running"] + counts["complete"],
            "exited": counts["exited"],
            "pending": counts["pending"] + undrawn,
            "failed": counts["failed"],
            "abandoned": counts["abandoned"],
            "restarts": self._restarts,
            "redraws": self.redraws,
            "simulation_seconds": self._seconds + running_time,
        }

    def describe(self, sid: int) -> str:
        """One line on a simulation for error messages: state, exit codes, parameters."""
        record = self.records.get(sid)
        if record is None:
            return f"simulation {sid}: not launched by this study"
        text = (
            f"simulation {sid}: {record.status}, exit codes {record.exit_codes}, "
            f"parameters {record.parameters}"
        )
        return f"{text} ({record.reason})" if record.reason else text

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable; the records as columns in id order (see `STATE_VERSION`;
        `records_of` reads any version back as one object per simulation). The losses
        `observe` noted are applied first: the sampler's state holds them."""
        self.apply_observations()
        return {
            "version": STATE_VERSION,
            "sampler": self.sampler.state_dict(),
            "next_id": self.next_id,
            "simulations": columns(self.records, self.sampler.names),
            "redraws": self.redraws,
            "settings": settings_of(self.sampler, self.n_simulations),  # study_change's
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore; simulations that were running (or complete) are queued to run again;
        exited and finished ones stay so until `reconcile` says which data is complete.

        Raises:
            ValueError: an unknown version, or records that do not fit this sampler.
        """
        self.load_saved(read_saved(state, self.sampler.names))

    def load_saved(self, saved: SavedStudy) -> None:
        """`load_state_dict` of a state already read (`read_saved`: a resume reads it
        once, checks it, then applies it here); its records become this study's.

        Raises:
            ValueError: the sampler refuses its state.
            RuntimeError: `saved` was applied already (its records are a study's now).
        """
        if saved.applied:
            raise RuntimeError("this launcher state was applied already: read it again")
        self.sampler.load_state_dict(saved.sampler)
        saved.applied = True
        self._unapplied.clear()  # losses of the records replaced
        self.records, self.next_id, self.redraws = saved.records, saved.next_id, saved.redraws
        for record in self.records.values():
            if record.status in _ALIVE:  # interrupted: run it again (not a failure)
                record.status = "pending"
        self._reindex()
        self.queue = deque(sorted(self._ids["pending"]))

    def reconcile(self, complete: Iterable[int]) -> list[int]:
        """After `load_state_dict`: `complete` are the ids whose data every receiver has
        (from their checkpointed records). Those become finished; every other exited or
        finished simulation is queued to run again. Returns the ids queued again."""
        complete = set(complete)
        rerun = []
        requeued = False
        for sid, record in self.records.items():
            status = record.status
            if sid in complete and status in ("pending", "exited"):
                requeued |= status == "pending"
                self._move(sid, "finished")
            elif sid not in complete and status in ("exited", "finished"):
                self._move(sid, "pending")
                rerun.append(sid)
        if requeued:  # some queued ones are finished after all
            self.queue = deque(sid for sid in self.queue if self.records[sid].status == "pending")
        self.queue = deque(sorted([*self.queue, *rerun]))
        return sorted(rerun)

    def cancel_past_the_end(self) -> list[int]:
        """A resumed study with fewer simulations than its record (`study_change`):
        cancel the pending ones past the new end (forgotten: not launched, not counted
        as failed, their ids not reused). Returns their ids; none in a study that fits."""
        pending = sorted(self._ids["pending"])
        counted = sum(len(self._ids[s]) for s in _ACTIVE) - len(pending)
        _, cancelled = past_the_end(pending, counted, self.n_simulations)
        for sid in cancelled:
            self._ids["pending"].discard(sid)
            self._restarts -= self.records[sid].restarts
            self._seconds -= self.records[sid].seconds
            del self.records[sid]
        if cancelled:
            self.queue = deque(sid for sid in self.queue if sid in self.records)
        return cancelled

    # -- the index ----------------------------------------------------------------------

    def _move(self, sid: int, status: str) -> None:
        """Set the status of `sid` (drawn), keeping the index by status."""
        record = self.records[sid]
        self._ids[record.status].discard(sid)
        self._ids[status].add(sid)
        record.status = status

    def _stopwatch(self, record: SimulationRecord, now: float) -> None:
        """An attempt's process ended: add its wall time to the record and the total."""
        if record.started is not None:
            elapsed = max(0.0, now - record.started)
            record.seconds += elapsed
            self._seconds += elapsed
        record.started = None

    def _reindex(self) -> None:
        """Rebuild the index and totals from the records (after a load)."""
        self._ids = {status: set() for status in STATUSES}
        for sid, record in self.records.items():
            self._ids[record.status].add(sid)
        self._restarts = sum(r.restarts for r in self.records.values())
        self._seconds = sum(r.seconds for r in self.records.values())
