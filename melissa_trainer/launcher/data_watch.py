"""`DataWatch`: what the receivers report of the simulations' data, applied by the
supervisors, a base class of them (`supervisor.Supervisor`, and worker mode's through it).

* **Complete data** (`take_completed`): a simulation that exited 0 ("exited") is finished
  once the receivers have all its data (`study_record` has the state machine; a line when
  it comes: `data_arrived`); from any thread, so that a checkpoint records as finished
  every simulation the receivers have complete.
* **Refused HELLOs** (`check_data`): the job is killed ("refused" is recorded) and the
  attempt failed, or the study stops (`stop_for_solver`); one whose process had already
  exited 0 fails for that reason (`refused_after_exit`).
* **Data that stopped short** (`check_data`): an exited simulation whose data has not all
  arrived `DRAIN_GRACE` s after its exit, with the receiver idle for `IDLE_GRACE` s,
  failed (its line says what the receivers lack).
* **The bound on data in flight** (`data_bound`, `held_by_data_bound`): at most
  `job_limit` ended simulations await their data when one more starts (twice that while
  a rank starves and rank 0 is back-pressured: `study.starvation`).

Runs on the launcher's thread but where said; the `StudyRecord` is touched only under the
shared lock, the backend's calls (a kill may block up to `kill_grace`) are made outside it.
"""

from __future__ import annotations

import logging
import time

from melissa_trainer.launcher.completed_reports import CompletedReports
from melissa_trainer.launcher.silence_watch import SilenceWatch

__all__ = ["DRAIN_GRACE", "IDLE_GRACE", "DataWatch"]

logger = logging.getLogger("melissa_trainer.launcher")

#: seconds after an exit 0 before data that has not all arrived counts as lost (the
#: receiver must also have been idle, its socket empty, for `IDLE_GRACE` s)
DRAIN_GRACE, IDLE_GRACE = 2.0, 1.0


class DataWatch(SilenceWatch):
    """The receivers' reports of data applied, and the bound on data in flight, for the
    supervisors (which set the attributes declared here)."""

    #: worker mode's supervisor (its workers report a simulation finished, not exit)
    worker_mode: bool
    #: the receivers' refusals already applied (`check_data`)
    _seen_refused: int
    #: the receivers' reports of complete data, applied as they come (`take_completed`)
    _completed: CompletedReports
    #: a rank starves while rank 0 is back-pressured (`data_bound`)
    bound_lifted: bool

    def check_data(self, now: float) -> None:
        """Apply what the receivers report: complete data, refused HELLOs, and exited
        simulations whose data stopped short."""
        data = self.data
        if data is None:
            return
        self.take_completed()
        fresh = data.refused(self._seen_refused)
        self._seen_refused += len(fresh)
        for sid, why in fresh:
            running = [(n, job) for n, job in self.jobs.items() if job.simulation_id == sid]
            self.stop_for_solver(sid, why, running)  # (if no attempt can fix it: raises)
            for name, job in running:
                logger.error("simulation %d refused by the receiver: %s; killing it", sid, why)
                with self.lock:
                    self.study.records[sid].reason = why
                grace = self.settings.tuning.kill_grace
                self.backend.kill(job.handle, grace, f"refused by the receiver: {why}")
                del self.jobs[name]
                self.job_killed(job, time.monotonic(), "refused")
            if not running:
                self.refused_after_exit(sid, why)
        with self.lock:
            exited = sorted(self.study.ids("exited"))  # O(exited), not O(study)
        if not exited or data.idle_seconds() < IDLE_GRACE:
            return
        for sid in exited:
            with self.lock:
                record = self.study.records[sid]
                if record.exited_at is None or now - record.exited_at < DRAIN_GRACE:
                    continue
                attempt = record.attempts - 1  # (named as its "waiting" line named it)
            # (a worker does not exit: it asked for more, reporting this one finished)
            ended = "its worker reported it finished" if self.worker_mode else "it exited 0"
            why = (
                f"{ended} but its data did not all arrive ({data.describe(sid)}); a "
                f"solver must send every step and close its client before it exits (BYE: "
                f"Client.close() in Python, mt_client_close in C, mt_close in Fortran)"
            )
            if self.worker_mode:
                why += (
                    "; a worker that catches its simulation's failure reports it: "
                    "next_simulation(exit_code=1)"
                )
            logger.warning("simulation %d attempt %d: %s", sid, attempt, why)
            with self.lock:
                outcome = self.study.incomplete(sid, why)
            self.apply_policy(sid, outcome, "exit 0, data incomplete", self.log_of(sid))

    def refused_after_exit(self, sid: int, why: str) -> None:
        """A refusal of a simulation whose process had already exited 0 (a solver that
        sent NaN in its last steps, under ``nonfinite="fail"``, and ended before the
        launcher heard of it): the attempt fails for that reason, not later as "data
        incomplete" (its refused steps never arrive). Nothing for one that is no longer
        waiting for its data (restarted, or given up)."""
        with self.lock:
            if self.study.records[sid].status != "exited":
                return
            outcome = self.study.incomplete(sid, why, "refused")
        logger.error("simulation %d refused by the receiver after it exited: %s", sid, why)
        self.apply_policy(sid, outcome, "refused after exit 0", self.log_of(sid))

    def _awaiting_data(self) -> int:
        with self.lock:
            return self.study.awaiting_data()

    def data_bound(self) -> int:
        """The most ended simulations awaiting their data at which one more may start
        (`launch_jobs`): `job_limit`, or twice that while `bound_lifted` and the
        receiver that reports data waits for room now: a rank starved of data holds
        back rank 0, whose data the bound waits for, so only more simulations can feed
        it (`study.starvation`); the memory stays bounded, by one more `job_limit` of
        simulations' data. The back-pressure is read here, at each launch, not taken
        from `bound_lifted`, which its setter refreshes once per poll of its own: a
        rank 0 whose training caught up takes data in again, and the bound is
        `job_limit` again at once (before, up to that poll later: on a Slurm study's
        30 s poll, simulations went on starting past `job_limit`'s bound meanwhile)."""
        limit = self.settings.job_limit
        if not self.bound_lifted or self.data is None or not self.data.backpressured():
            return limit
        return 2 * limit

    def held_by_data_bound(self) -> bool:
        """Simulations are left to start and `data_bound` keeps them back (that many
        ended simulations' data not in), whether or not a job slot is free. Any thread."""
        with self.lock:
            awaiting, left = self.study.awaiting_data(), self.study.work_left()
        return left > 0 and awaiting > self.data_bound()

    def take_completed(self) -> None:
        """Apply the receivers' new reports of complete data (cheap: a slice of a list).
        Any thread: the launcher's, and `Launcher.state_dict`'s, so that a checkpoint
        records as finished every simulation the receivers have complete."""
        if self.data is None:
            return
        arrived: list[tuple[int, int, float]] = []  # (id, attempt, exited at): `data_arrived`
        with self.lock:  # (the count read and advanced by one thread at a time)
            exited = self.study.ids("exited") if self._completed.before else ()
            for sid in [*self._completed.new(self.data), *self._completed.rerun_done(exited)]:
                record = self.study.records.get(sid)
                waited = record.exited_at if record and record.status == "exited" else None
                changed = self.study.data_complete(sid)
                if changed and self.study.records[sid].status == "finished":
                    self.log_paths.pop(sid, None)  # (kept for failures only)
                    if record is not None and waited is not None:
                        arrived.append((sid, record.attempts - 1, waited))
        for sid, attempt, exited_at in arrived:
            self.data_arrived(sid, attempt, time.monotonic() - exited_at)
