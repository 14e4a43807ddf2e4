"""`LauncherRecord`: the study's record as a `Launcher` shows it, a base class of
`Launcher`.

What any thread may read of a running study (`done`, `summary`, `jobs_alive`,
`failures`, `outcomes`, `describe`), the losses that steer an adaptive sampler
(`observe`), and the launcher's part of a checkpoint: its record saved (`state_dict`),
and a saved one checked and applied before the study starts (`check_resume`,
`load_state_dict` / `resume`, `reconcile`). Each reads or changes the `StudyRecord`
under the launcher's lock, the one the supervisor holds for its bookkeeping (never while
it waits on a job; `jobs_alive` counts the supervisor's jobs without it); none starts,
waits on or kills a job.

`launcher.Launcher` sets the attributes declared here and runs the supervisor's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.launcher.log_lines import warn
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.simulation_record import SavedStudy
from melissa_trainer.launcher.study_change import check_resume, program_change
from melissa_trainer.launcher.study_record import StudyRecord

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.launcher.supervisor import Supervisor

__all__ = ["EXCUSE_LIFETIME", "LauncherRecord"]

logger = logging.getLogger("melissa_trainer.launcher")

#: seconds, beyond `LauncherTuning.poll_interval`, that the launcher's excuse for the
#: stream's silence (`LauncherRecord.silence_explained`) holds after its thread's last
#: completed poll. A thread hung alive in a backend call (a Slurm ``squeue`` that never
#: returns) no longer excuses the silence past it, and the stall watchdog judges it.
#: Longer than a poll that waits on a slow scheduler or kills a few jobs (`kill_grace`
#: each), shorter than the receiver's default `stall_timeout` (600 s).
EXCUSE_LIFETIME = 120.0


class LauncherRecord:
    """The study's record under the launcher's lock (see the module docstring);
    `Launcher` sets the attributes declared here."""

    _lock: threading.Lock
    _study: StudyRecord
    #: the running supervisor (None before `start`)
    _supervisor: Supervisor | None
    #: the supervisor's thread (None before `start`)
    _thread: threading.Thread | None
    #: why the study or the launcher's thread failed (None while it has not)
    _error: BaseException | None
    #: `stop` was called
    _stopped: bool
    #: the records as the last `state_dict` saved them (status and attempts only: what
    #: `account.stop_resume_lines` reads); None before the first
    saved_outcomes: list[SimulationOutcome] | None = None
    #: what the jobs run (`study_change.program_of`), saved in `state_dict` and compared
    #: by `check_resume`; None: not recorded (nothing saved, nothing compared)
    program: dict[str, Any] | None = None

    # -- what any thread may read -----------------------------------------------------------

    @property
    def done(self) -> bool:
        """Every simulation finished or was given up (False once the study failed).

        False from the moment the supervisor's thread judges the study failed (its
        record's `failure`, set under the lock with the last record's move), not only
        once its error is stored: a loop ``while not launcher.done: launcher.check()``
        (and the end-of-study notice) never takes a failed study for a complete one."""
        with self._lock:
            return self._error is None and not self._study.failure and self._study.done

    @property
    def failed(self) -> bool:
        """The study failed, or the launcher's thread did: its error is stored (`check`
        raises it), or the thread has judged the study failed and is about to store it
        (the record's `failure`, as `done` reads it). What decides that the study ended
        without `done` (the end-of-study notice's held branch) reads this first."""
        with self._lock:
            return self._error is not None or bool(self._study.failure)

    def summary(self) -> dict[str, float]:
        """Counts: finished, running (a process alive), exited (exit 0, data still due),
        pending (queued or not drawn yet), failed (given up for good), not_replaced (of
        those, the ones that failed the study: each holds its place, never pending),
        abandoned, restarts, redraws (each place counted once: `StudyRecord.summary`); and
        simulation_seconds, the wall time of all jobs so far, of which startup_seconds
        from the first attempts' launch to their first message (with a heartbeat; this
        run's attempts only, not saved in a checkpoint): to the first DATA message's
        arrival as the receiver timed it (`DataReport.first_message_at`, exact under
        load); and rerun_startup_seconds the same of the reruns (a restart, a resumed
        study's rerun: `Advice.first_message`), whose simulation sent before: to the
        launcher's last tick that found no message of it (to within a poll), which may
        include steps it recomputed, not start-up alone. In worker mode,
        simulation_seconds counts each simulation from its assignment to a worker, and
        startup_seconds adds each worker's launch-to-first-request, the start-up it pays
        once (outside simulation_seconds, then)."""
        supervisor = self._supervisor
        with self._lock:
            summary = self._study.summary(time.monotonic())
        advice = None if supervisor is None else supervisor.advice
        summary["startup_seconds"] = 0.0 if advice is None else advice.startup_seconds
        summary["rerun_startup_seconds"] = 0.0 if advice is None else advice.rerun_startup_seconds
        return summary

    def data_backpressured(self) -> bool:
        """Whether the receiver that reports data (rank 0's) waits for room in its buffer
        (`DataReport.backpressured`): it cannot take in what it holds, so the launcher does
        not judge an exited simulation's data incomplete. False without one. Any thread."""
        supervisor = self._supervisor
        data = None if supervisor is None else supervisor.data
        return data is not None and data.backpressured()

    def lift_data_bound(self, lifted: bool) -> None:
        """Raise (True) or restore (False) the bound on ended simulations awaiting their
        data (`Supervisor.data_bound`: 2 x `job_limit` instead of `job_limit`), for a
        rank starved of data while rank 0 is back-pressured (`study.progress`). Any
        thread; no effect before `start`."""
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.bound_lifted = lifted

    def held_by_data_bound(self) -> tuple[bool, int]:
        """Whether simulations are left to start that the bound on ended simulations
        awaiting their data keeps back, and that bound (`Supervisor.data_bound`);
        (False, 0) before `start`. Any thread."""
        supervisor = self._supervisor
        if supervisor is None:
            return False, 0
        return supervisor.held_by_data_bound(), supervisor.data_bound()

    def jobs_alive(self) -> int:
        """The jobs started and not yet seen to end: simulations, or in worker mode the
        workers, whether or not they have taken a simulation (0 before `start`). Any
        thread: read without the lock, a moment's figure for messages."""
        supervisor = self._supervisor
        return 0 if supervisor is None else len(supervisor.jobs)

    def queued(self) -> tuple[int, dict[str, int]]:
        """The jobs alive that their scheduler still queues (not started: Slurm's
        PENDING), as of the launcher's last tick, and their count by the reason the
        scheduler gave (Slurm's ``squeue %r``: ``Resources``, ``BeginTime``...; a job
        it gave none for is in the total only). Their simulations count as "running"
        in `summary` (launched, alive). (0, {}) before `start`. Any thread: an
        attribute read, as of the last tick."""
        supervisor = self._supervisor
        return (0, {}) if supervisor is None else supervisor.queued

    def silence_explained(self, idle: float = 0.0) -> str | None:
        """What the stream's silence waits for, when the launcher knows
        (`melissa_trainer.launcher.expected_silence`: every job alive is queued, or
        within its start-up allowance), else None; None too before `start`, after
        `stop` and once the launcher's thread ended. A `Study` gives it to the
        receiver's stall watchdog (`StreamSource.excuse_silence`); `idle` (the
        stream's idle seconds) is not needed here. Any thread; attribute reads.

        The excuse is the last completed poll's: None too once that poll is more than
        `EXCUSE_LIFETIME` s beyond `poll_interval` old (the thread hung: logged once
        per hang)."""
        supervisor, thread = self._supervisor, self._thread
        if supervisor is None or thread is None or not thread.is_alive() or self._stopped:
            return None
        excuse, at = supervisor.silence_explained, supervisor.explained_at
        if excuse is None:
            return None
        age = time.monotonic() - at
        if age <= supervisor.settings.tuning.poll_interval + EXCUSE_LIFETIME:
            return excuse
        if not supervisor.expiry_said:
            supervisor.expiry_said = True
            warn(
                logger,
                f"the launcher's thread has not completed a poll for {age:.0f} s (a backend "
                "call that does not return?): its excuse for the stream's silence "
                f"({excuse}) no longer holds (EXCUSE_LIFETIME={EXCUSE_LIFETIME:g} s beyond "
                "poll_interval in melissa_trainer.launcher.launcher_record)",
            )
        return None

    def failures(self) -> str:
        """The study's failures as text: each failed simulation, its exit codes and the
        last lines of its log ("" before `start`)."""
        supervisor = self._supervisor
        return "" if supervisor is None else supervisor.failures()

    def outcomes(self) -> list[SimulationOutcome]:
        """Every simulation drawn, in id order: its status, exit codes, the reason it
        was refused or failed, its parameters, its launches, and whether it failed the
        study, not replaced (`account`). Any thread."""
        with self._lock:
            return [
                SimulationOutcome(
                    sid,
                    r.status,
                    list(r.exit_codes),
                    r.reason,
                    dict(r.parameters),
                    r.attempts,
                    sid in self._study.not_replaced_ids,
                )
                for sid, r in sorted(self._study.records.items())
            ]

    def describe(self, simulation_id: int) -> str:
        """One line on a simulation: its state, exit codes, parameters."""
        with self._lock:
            return self._study.describe(simulation_id)

    # -- steering -------------------------------------------------------------------------

    @property
    def sampler(self) -> Sampler:
        """Where the parameters come from (draw from it only through the launcher). An
        adaptive sampler is given the losses `observe` took before its next draw, in
        `state_dict` and at `stop` (not at once: `StudyRecord.observe`)."""
        return self._study.sampler

    def observe(self, losses: Mapping[int, float]) -> int:
        """Steer an adaptive sampler: `losses` maps simulation ids to how badly the
        surrogate does on their data (a `Study` passes each simulation's relative
        training loss). Thread-safe: under the lock the next draw is made under, so a
        worker asking for its next simulation gets a draw that saw these. Cheap: the
        losses are noted, and the sampler observes them on the launcher's thread before
        its next draw (`StudyRecord.observe`). Returns how many were noted; non-finite
        losses and unknown ids are skipped and logged.

        Raises:
            TypeError: the sampler is not an `AdaptiveSampler`.
            ValueError: a loss that is not a number.
        """
        with self._lock:
            observed, skipped = self._study.observe(losses)
        if skipped:
            logger.info("%s not observed (non-finite, or unknown ids): %s",
                        plural(len(skipped), "loss"), skipped[:8])  # fmt: skip
        return observed

    # -- checkpoint -----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable: the sampler's position, the next id, every simulation's
        record (parameters, status, restarts, exit codes, seconds) and the redraw count.

        The receivers' reports of complete data not yet applied by the launcher's
        thread (it does so every `poll_interval`) are applied first: a simulation whose
        data the checkpointed buffer holds is recorded as finished, not as exited. The
        records saved are kept as `saved_outcomes` (the stop's account of a resume)."""
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.take_completed()
        with self._lock:
            state = self._study.state_dict()
            if self.program is not None:
                state["program"] = self.program
            # (under the same lock: the records as saved, for the stop's account)
            self.saved_outcomes = [
                SimulationOutcome(sid, r.status, (), "", {}, r.attempts)
                for sid, r in sorted(self._study.records.items())
            ]
            return state

    def check_resume(self, state: Mapping[str, Any]) -> SavedStudy:
        """Raise if this launcher cannot resume the study of `state` (a `state_dict`);
        changes nothing. What may change on resume (more or fewer simulations) and what
        may not (the sampler, its ranges, its seed...) is `study_change`'s; a changed
        simulation command or `env` is warned about (`study_change.program_change`).
        Returns the state as read (migrated, its records built: once), for `resume`.

        Raises:
            StudyChanged: a ValueError naming the setting that changed and the fix.
        """
        with self._lock:
            saved = check_resume(state, self._study)
        if self.program is not None:
            done = ("finished", "complete")  # (their data made with the old command)
            finished = sum(1 for r in saved.records.values() if r.status in done)
            warning = program_change(state.get("program"), self.program, finished)
            if warning:
                logger.warning("resume: %s", warning)
        return saved

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume a study (before `start`): finished and given-up simulations are not run
        again; those that were running are relaunched (``MELISSA_TRAINER_ATTEMPT``
        continues their count, and the receivers' dedup drops what they already have).
        With fewer `n_simulations` than the saved study, `start` cancels the unfinished
        ones past the new end (`study_change`).

        Raises:
            RuntimeError: after `start`.
            ValueError: a state of another version or parameter space, or settings
                changed in a way the study cannot follow (`check_resume`).
        """
        if self._thread is not None:
            raise RuntimeError("Launcher.load_state_dict() must be called before start()")
        self.resume(self.check_resume(state))

    def resume(self, saved: SavedStudy) -> None:
        """`load_state_dict` of a state that `check_resume` read and returned: applied
        without reading (migrating, building its records) again. Once per `saved`.

        Raises:
            RuntimeError: after `start`, or `saved` applied already.
        """
        if self._thread is not None:
            raise RuntimeError("Launcher.resume() must be called before start()")
        with self._lock:
            self._study.load_saved(saved)

    def reconcile(self, complete: Iterable[int]) -> list[int]:
        """After `load_state_dict`, before `start`: `complete` are the ids whose data
        every receiver has in its checkpointed record. They are finished; every other
        simulation that had run (exited, or "finished" by an exit 0 whose data the
        checkpoint does not hold) runs again. Returns the ids that run again."""
        if self._thread is not None:
            raise RuntimeError("Launcher.reconcile() must be called before start()")
        with self._lock:
            rerun = self._study.reconcile(complete)
        if rerun:
            logger.info(
                "resume: %s had exited but the checkpoint lacks some of %s data; %s again: %s",
                plural(len(rerun), "simulation"),
                "its" if len(rerun) == 1 else "their",
                "it runs" if len(rerun) == 1 else "they run",
                rerun,
            )
        return rerun
