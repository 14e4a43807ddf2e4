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
                                   │ restarts used up (or a final exit code)
                                   ▼
                    failed (redrawn: a new id replaces it) | abandoned | the study raises

* **pending**: queued to run (a first run, or a restart: `restarts` > 0). An attempt
  that exited with one of `final_exit_codes` is never restarted: the failure policy
  applies at once, and its `reason` says why.
* **running**: its process is alive, its data incomplete.
* **complete**: every step it sent reached the buffer; its process has not exited yet.
* **exited**: its process exited 0, but its data has not all reached the buffer yet
  (still queued in ZeroMQ, behind a full buffer, or lost). If it never completes, the
  attempt failed: "exit 0" alone is never success.
* **finished**: its data is complete *and* its process ended. Only this counts as done.
* **failed**: given up after `max_restarts` restarts and replaced by a redraw (a new id,
  new parameters; a failed id is never reused). The sampler is told (`Sampler.failed`)
  before the replacement's draw, as it is of an abandoned one.
  Not replaced when it makes the study fail (``on_failure="raise"``, or the failure
  budget or the redraws used up): counted in `not_replaced`, it holds its place in the
  study (not "pending": nothing is drawn in its place, on resume too: the count is in
  the checkpoint), as `reports.study_counts` says.
* **abandoned**: given up (``on_failure="abandon"``); the study goes on without it, or
  fails if it used up the failure budget (abandoned all the same: nothing replaces it).

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
receiver's checkpointed record has all its data; every other one that had run runs
again (the receivers' exactly-once dedup drops what they already have).

Every status change goes through `StatusIndex.move` (the ids by status, which `done` and
`summary` read in O(1)); the losses for an adaptive sampler wait in `PendingLosses`. The
record's checkpoint (save, load, reconcile on resume): its base's base,
`StudyRecordState` (`study_record_state`); what a failed attempt becomes (the failure
policy): its base, `AttemptPolicy` (`attempt_policy`).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping

from melissa_trainer.launcher.attempt_policy import AttemptPolicy
from melissa_trainer.launcher.draw_log import draw_origin, explored_count
from melissa_trainer.launcher.pending_losses import PendingLosses
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.simulation_record import SimulationRecord
from melissa_trainer.launcher.status_index import StatusIndex
from melissa_trainer.launcher.study_record_state import ACTIVE, ALIVE

__all__ = ["StudyRecord", "StudyFailed"]

_WAITED = ("pending", "running", "complete", "exited")  # the study waits for these


class StudyFailed(RuntimeError):
    """The study cannot reach its goal (the message says why and lists the failures)."""


class StudyRecord(AttemptPolicy):
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
        final_exit_codes: tuple[int, ...] = (),
    ) -> None:
        self.sampler = sampler
        self.n_simulations = n_simulations
        self.max_restarts, self.on_failure, self.max_redraws = max_restarts, on_failure, max_redraws
        self.min_finished_fraction = min_finished_fraction
        #: exit codes never restarted (`LauncherTuning.final_exit_codes`)
        self.final_exit_codes = frozenset(final_exit_codes)
        #: simulations that may be given up before the study fails
        self.max_given_up = max(0, n_simulations - math.ceil(min_finished_fraction * n_simulations))
        #: True when receivers report data ("exited" until then); False: exit 0 finishes
        self.data_reported = False
        self.records: dict[int, SimulationRecord] = {}
        # every status change goes through it (`_move`): `done` and `summary` read it
        self._index = StatusIndex()
        self.queue: deque[int] = deque()  # pending ids, in launch order
        self.next_id = first_simulation_id
        self.redraws = 0
        #: why the study failed (empty while it has not): the policy or the budget used
        #: up of the last outcome "raise", or a systematic failure (`FailurePolicy`)
        self.failure = ""
        #: simulations failed for good and not replaced: those that failed the study
        #: ("raise"); each holds its place (never counted pending, never redrawn)
        self.not_replaced = 0
        self.not_replaced_ids: set[int] = set()  # which ones (`Launcher.outcomes` says)
        #: losses noted by `observe`, not yet given to the sampler
        self._losses = PendingLosses()

    # -- queries and transitions --------------------------------------------------------

    def counts(self) -> Counter[str]:
        """Simulations drawn, per status (O(1): see `_move`)."""
        return self._index.counts()

    def ids(self, status: str) -> list[int]:
        """The ids in `status`, in no particular order (O(their number))."""
        return self._index.ids(status)

    def observe(self, losses: Mapping[int, float]) -> tuple[int, list[int]]:
        """Note each simulation's loss for the adaptive sampler (`PendingLosses.note`);
        returns how many were noted and the ids skipped (a non-finite loss, an id never
        drawn). The sampler is given them later (`apply_observations`): before its next
        draw, in `state_dict`, and when the launcher stops.

        Raises:
            TypeError: the sampler is not an `AdaptiveSampler`.
            ValueError: a loss that is not a number (nothing is noted then).
        """
        return self._losses.note(self.sampler, self.records, losses)

    def awaiting_data(self) -> int:
        """Simulations whose process ended with their data not all in yet ("exited"):
        they hold a job slot (see `Supervisor.launch_jobs`). O(1)."""
        return self._index.count("exited")

    def undrawn(self) -> int:
        """The study's places not drawn yet: all but those of the active simulations and
        of those that failed the study (`not_replaced`: no redraw takes theirs). O(1)."""
        taken = self._index.count(*ACTIVE) + self.not_replaced
        return max(0, self.n_simulations - taken)

    def work_left(self) -> int:
        """Simulations still to start: queued ones plus those not drawn yet."""
        return len(self.queue) + self.undrawn()

    @property
    def done(self) -> bool:
        """Nothing runs, nothing waits for its data and nothing is left to start."""
        return self.work_left() == 0 and self._index.count(*_WAITED) == 0

    def take(self, now: float) -> int | None:
        """The simulation to launch now (marked running), or None if there is none.

        Raises:
            SamplerExhausted: a new parameter set was needed and the sampler has none.
        """
        if self.queue:
            sid = self.queue.popleft()
        elif self.work_left() > 0:
            self.apply_observations()  # the draw sees every loss reported so far
            explored = explored_count(self.sampler)
            parameters = self.sampler.draw()
            sid, self.next_id = self.next_id, self.next_id + 1
            self.records[sid] = SimulationRecord(parameters)
            self._index.add(sid, self.records[sid])
            if self.draw_log is not None:
                self.draw_log.drew(sid, parameters, *draw_origin(self.sampler, explored))
        else:
            return None
        record = self.records[sid]
        self._move(sid, "running")
        record.started = now
        record.attempts += 1
        return sid

    def process_ended(
        self, sid: int, now: float, code: int | str, own: tuple[int, str] | None = None
    ) -> str:
        """Record the end of an attempt's process; returns what happens next: "finished",
        "exited" (exit 0, waiting for its data), or the failure policy's outcome (see
        `attempt_failed`; `own`: `final_exit`'s)."""
        record = self.records[sid]
        if record.status not in ALIVE:
            raise RuntimeError(f"simulation {sid} is {record.status}, not running")
        self._index.stopwatch(record, now)
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
        return self.attempt_failed(sid, own)

    def ended_as_study_failed(self, sid: int, now: float, code: int | str) -> str:
        """Record the end of an attempt's process found when the study had already
        failed, or as the launcher stops (`FailurePolicy.reap_exited`), with no
        failure policy applied (nothing is restarted, redrawn or told to the sampler:
        the study stops). Its exit code is kept; exit 0 (or its data complete) ends
        it as `process_ended` says ("finished", or "exited" awaiting its data); any
        other code leaves it "pending", as a stop's kill does (`interrupted`): a
        resumed study runs it again. Returns its status."""
        record = self.records[sid]
        if code == 0 or record.status == "complete":
            self.process_ended(sid, now, code)
            return record.status
        if record.status not in ALIVE:
            raise RuntimeError(f"simulation {sid} is {record.status}, not running")
        self.interrupted(sid, now)
        record.exit_codes.append(code)
        return record.status

    def interrupted(self, sid: int, now: float) -> None:
        """Its process was killed by the launcher's stop (not a failure): pending again,
        or finished if its data was complete."""
        record = self.records[sid]
        if record.status not in ALIVE:
            return
        self._index.stopwatch(record, now)
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

    # -- reports and state --------------------------------------------------------------

    def summary(self, now: float) -> dict[str, float]:
        """Counts of the study's simulations (`LauncherRecord.summary` has the keys),
        each in one place: finished, abandoned, not_replaced (failed the study), running,
        exited and pending (queued, or not drawn yet) add up to `n_simulations`; "failed"
        counts every record given up for good, `redraws` of them replaced by a new draw."""
        counts = self.counts()
        alive = (self.records[sid] for status in ALIVE for sid in self._index.ids(status))
        running_time = sum(now - r.started for r in alive if r.started is not None)
        return {
            "finished": counts["finished"],
            "running": counts["running"] + counts["complete"],
            "exited": counts["exited"],
            "pending": counts["pending"] + self.undrawn(),  # (never one that failed)
            "failed": counts["failed"],
            "not_replaced": self.not_replaced,
            "abandoned": counts["abandoned"],
            "restarts": self._index.restarts,
            "redraws": self.redraws,
            "simulation_seconds": self._index.seconds + running_time,
        }

    def describe(self, sid: int) -> str:
        """One line on a simulation for error messages: state, exit codes, parameters."""
        record = self.records.get(sid)
        if record is None:
            return f"simulation {sid}: not launched by this study"
        return record.describe(sid)
