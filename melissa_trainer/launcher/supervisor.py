"""The launcher's supervisor: one pass of watching and starting jobs, run by its thread.

`Supervisor` runs one simulation per job; `worker_mode.WorkerSupervisor` (worker mode)
changes how jobs get their simulations. Both apply the same failure policy:

* exit code 0 -> finished, or with a data report "exited" until the receivers have all
  its data (`study_record` has the state machine; a line when it comes: `data_arrived`);
  an exited simulation whose data has not all arrived `DRAIN_GRACE` s after its exit,
  with the receiver idle, failed (its line says what the receivers lack);
* a HELLO the receivers refused (fields other than the study's) -> the job is killed
  ("refused" is recorded) and the attempt failed (or the study stops: `stop_for_solver`);
* a non-zero exit code, or silence past `simulation_timeout` (its own silence:
  `silence` leaves out the trainer's pauses and back-pressure; the job is killed,
  named with its parameters, attempt and log; "timeout" is recorded) -> restarted
  with the same id and parameters (`MELISSA_TRAINER_ATTEMPT` + 1), up to
  `max_restarts` times (never after an exit code among `final_exit_codes`: the
  solver said its failure will repeat);
* then, per `on_failure`: "redraw" (the id is abandoned and a new id with new parameters
  is drawn, at most `max_redraws` times in the study, after which it is "raise"),
  "abandon" (the id is abandoned, the study goes on without it) or "raise" (the study
  fails with a `LauncherError` naming the simulation, its exit codes and its log).

"Abandoned" ids are passed to the `abandon` callback and redrawn ones to `redrawn`, so
that the receivers stop waiting for them (and, for a redraw, wait for its replacement);
past the study's failure budget (`study_record`), the study fails with the failures listed.
The heartbeat is ``heartbeat()[simulation_id]`` (messages received); the silence
counts from launch, and without a heartbeat callable it is the time since launch.

Everything here runs on the launcher's thread; the `StudyRecord` is touched only under the
shared lock (the launcher's other methods read it from any thread); the backend calls
(which may block up to `kill_grace`) are made outside it.

The policy itself (an ended attempt's outcome, acted on) and the reports naming the
failures are `failure_policy.FailurePolicy`'s; the heartbeat, the kills of silent
simulations and the start-up timing are `silence_watch.SilenceWatch`'s; the receivers'
reports of data (complete, refused, stopped short: `DRAIN_GRACE`) and the bound on data
in flight are `data_watch.DataWatch`'s (all three base classes of `Supervisor`);
`Settings` and `RunningJob` are `jobs`' (re-exported here).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from melissa_trainer.launcher.advice import Advice
from melissa_trainer.launcher.backends.base import Backend, Handle, Job, LaunchError
from melissa_trainer.launcher.completed_reports import CompletedReports
from melissa_trainer.launcher.data_watch import DataWatch
from melissa_trainer.launcher.expected_silence import explain_silence, queued_jobs
from melissa_trainer.launcher.jobs import RunningJob, Settings
from melissa_trainer.launcher.reports import DataReport, LauncherError, kills_report
from melissa_trainer.launcher.sampler_base import SamplerExhausted
from melissa_trainer.launcher.silence import SilenceClock
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.systematic import SystematicFailure
from melissa_trainer.launcher.templates import Command, simulation_env

__all__ = ["Supervisor"]

logger = logging.getLogger("melissa_trainer.launcher")


class Supervisor(DataWatch):
    """Runs one simulation per job (see the module docstring). It times each attempt's
    launch-to-first-message (with a heartbeat) for `advice`, which says once per study
    when start-up dominates, or when a restart failed as the attempt before it."""

    worker_mode = False

    def __init__(
        self,
        settings: Settings,
        study: StudyRecord,
        lock: threading.Lock,
        backend: Backend,
        command: Command,
        heartbeat: Callable[[], Mapping[int, int]] | None,
        abandon: Callable[[int], None] | None,
        redrawn: Callable[[int], None] | None = None,
        data: DataReport | None = None,
    ) -> None:
        self.settings, self.study, self.lock, self.backend = settings, study, lock, backend
        self.command, self.heartbeat, self.abandon = command, heartbeat, abandon
        self.redrawn, self.data = redrawn, data
        self.jobs: dict[str, RunningJob] = {}
        self._beats: Mapping[int, int] = {}
        self._seen_refused, self._completed = 0, CompletedReports(data, study)
        #: the last log of each simulation not finished (quoted when it fails)
        self.log_paths: dict[int, Path] = {}
        self.unheard, self.unheard_count = list[int](), 0
        tuning = settings.tuning
        self.silence = SilenceClock(
            tuning.simulation_timeout,
            floor=tuning.silence_floor,
            factor=tuning.silence_factor,
            startup=tuning.startup_timeout,
            poll_interval=tuning.poll_interval,
            heartbeat=heartbeat is not None,
        )
        self.systematic = SystematicFailure(tuning.systematic_failures, study.sampler.names)
        self.advice = Advice(self.worker_mode, settings.worker_hint)
        #: what the stream's silence waits for, or None (`expected_silence`): set at
        #: each tick by the launcher's thread, read from any thread
        self.silence_explained: str | None = None
        #: `time.monotonic()` when the last tick completed, with that excuse: an excuse
        #: older than `launcher_record.EXCUSE_LIFETIME` excuses nothing (a hung thread)
        self.explained_at = 0.0
        #: the expiry of the excuse was logged (`Launcher.silence_explained`): once per
        #: hang, said again after a tick completes
        self.expiry_said = False
        #: the jobs their scheduler still queues and their count by its reason
        #: (`expected_silence.queued_jobs`): set at each tick, read from any thread
        self.queued: tuple[int, dict[str, int]] = (0, {})
        #: worker mode: the launch times of the workers not heard from yet
        self.launched_at: dict[str, float] = {}
        #: a rank starves while rank 0 is back-pressured (`data_bound`): set from any
        #: thread (rank 0's progress thread, `study.progress`), read at each launch
        self.bound_lifted = False

    # -- the loop (called by the launcher's thread) ---------------------------------------

    def tick(self) -> None:
        """Poll the jobs, kill the silent ones, start new ones; raises LauncherError."""
        now = time.monotonic()
        self.poll_jobs(now)
        self.check_data(now)
        self.check_timeouts(now)
        self.launch_jobs(now)
        self.explain_silence(now)

    def explain_silence(self, now: float) -> None:
        """Say what the stream's silence waits for, if the jobs explain it (at the
        end of each tick: the jobs killed or started by it are counted)."""
        self.silence_explained = explain_silence(
            self.jobs, self.silence, self.backend.started, self.launched_at, now
        )
        self.queued = queued_jobs(self.jobs, self.backend.started, self.backend.queue_reason)
        self.explained_at, self.expiry_said = time.monotonic(), False

    def wait(self, stop: threading.Event) -> None:
        """Sleep until the next tick (or `stop`)."""
        stop.wait(self.settings.tuning.poll_interval)

    def finished(self) -> bool:
        """The study is complete and no job is left."""
        with self.lock:
            return self.study.done and not self.jobs

    def shutdown(self, why: str = "the study stops") -> None:
        """Kill every job (no orphans; `why` in their logs) and close the backend; their simulations
        are pending again (or finished, if their data was complete), so that a resumed study
        runs them again and the summary counts no dead process as running. The jobs that
        exited since the last poll are recorded ended first, not killed (`reap_exited`): a
        simulation that exited 0 is finished (or awaits its data), not pending, and a
        resumed study does not run it again. One that exits between that reap and its kill
        is recorded so too when the kill says it ended on its own (`Backend.kill` returns
        its exit code: the backends' own look just before their signal; any end after it is
        the kill's, exit 0 included). What remains is the backend's: a job that ends on its
        own in the instant between that look and the signal, or any end a backend cannot
        tell from its kill (one whose `kill` returns None), is recorded killed, pending: run
        again on resume. A `kill_all` that fails (raises) leaves every job so recorded and
        the backend closed (its `close` kills what the call left), then the error is raised
        (a `close` that fails then too is logged with its traceback, not raised over it)."""
        self.unheard_summary()
        self.reap_exited("before the stop")
        if self.jobs:  # (one line for them all, not one a job: hundreds may be in flight)
            logger.info(kills_report(list(self.jobs), self.settings.tuning.kill_grace))
        jobs = list(self.jobs.items())
        codes: list[int | None] = [None] * len(jobs)  # (a failed kill_all: all killed)
        try:  # (one grace for them all where the backend can: `Backend.kill_all`)
            codes = self.backend.kill_all(
                [job.handle for _, job in jobs], self.settings.tuning.kill_grace, [why] * len(jobs)
            )
        except BaseException:  # recorded and closed all the same (close kills what it left)
            self._record_killed(jobs, codes)
            try:
                self.backend.close()
            except Exception:  # (the kill's error is the one raised: said, not lost)
                logger.exception("the backend's close failed too, after its kill failed")
            raise
        self._record_killed(jobs, codes)
        self.backend.close()

    def _record_killed(self, jobs: list[tuple[str, RunningJob]], codes: list[int | None]) -> None:
        """The stop's killed `jobs` forgotten and recorded (`shutdown`)."""
        for (name, job), code in zip(jobs, codes, strict=True):
            del self.jobs[name]
            if job.simulation_id is None:
                continue
            if code is not None:  # it ended on its own after the reap, before the kill
                self.record_ended(job, code, time.monotonic(), "before the stop's kill")
            else:
                with self.lock:
                    self.study.interrupted(job.simulation_id, time.monotonic())

    # -- one simulation per job -----------------------------------------------------------

    def poll_jobs(self, now: float) -> None:
        for name, job in list(self.jobs.items()):
            code = self.backend.poll(job.handle)
            if code is not None:
                del self.jobs[name]
                self.job_ended(job, code, now)

    def job_ended(self, job: RunningJob, code: int, now: float) -> None:
        assert job.simulation_id is not None
        sid = job.simulation_id
        # a solver that sends all its steps within one poll after its start-up, then
        # exits: its first message was never seen at a tick (its start-up still counts)
        untimed = self.heartbeat is not None and job.startup is None
        if untimed and self.refresh_beats().get(sid, 0) != job.beat:
            self.started_sending(job, sid)
        self.end_simulation(sid, code, now, job.log_path, node=self.backend.ran_on(job.handle))

    def launch_jobs(self, now: float) -> None:
        """Start jobs while fewer than `job_limit` run and at most `job_limit` ended
        simulations await their data.

        Without the second bound, short simulations end before the trainer has their
        data, which stays queued in ZeroMQ (its bound is per connection, and a closed
        connection's messages stay), and the next ones start: no bound on that memory,
        nor on what a resume must run again. With it, about 2 x `job_limit`
        simulations' data is in flight at most (3 x while a rank starves:
        `data_bound`); the slack keeps a simulation's end (its data arrives a few ms
        after its process exits) from waiting for the next tick, even with `job_limit` 1.
        """
        limit = self.settings.job_limit
        while len(self.jobs) < limit and self._awaiting_data() <= self.data_bound():
            taken = self.take(now)
            if taken is None:
                return
            sid, parameters, attempt = taken
            name = f"sim-{sid}" if attempt == 0 else f"sim-{sid}-r{attempt}"
            log_path = self.settings.log_dir / f"sim-{sid}.log"
            env = {
                **self.settings.env,
                **simulation_env(
                    sid,
                    parameters,
                    self.settings.rendezvous_dir,
                    attempt,
                    self.silence.shortest(),
                ),
            }
            argv = self.command(sid, parameters)
            what = f"attempt {attempt}"  # (the simulation: in its job's name, sim-{sid})
            handle = self.start_job(Job(name, argv, env, None, log_path, self.settings.ranks), what)
            job = RunningJob(handle, None, log_path)
            job.assign(sid, now, self.beat_of(sid))
            self.jobs[name] = job
            logger.info(
                "simulation %d started (attempt %d): %s %s",
                sid,
                attempt,
                self.backend.describe(handle),
                parameters,
            )

    # -- shared by both modes -------------------------------------------------------------

    def take(self, now: float) -> tuple[int, dict[str, float], int] | None:
        """The next simulation to run, marked running: (id, parameters, attempt)."""
        with self.lock:
            try:
                sid = self.study.take(now)
            except SamplerExhausted as exc:
                raise LauncherError(f"no parameters left to draw: {exc}") from exc
            if sid is None:
                return None
            record = self.study.records[sid]
            return sid, dict(record.parameters), record.attempts - 1

    def start_job(self, job: Job, what: str) -> Handle:
        """Launch `job` (`what` of its simulation or worker it is, ``attempt 1``,
        ``launch 2``, as its log's first line says: `Job.say_start`)."""
        job.say_start(what, self.backend.name)
        try:
            return self.backend.launch(job)
        except LaunchError as exc:
            said = str(exc)
            if "\n" in said:  # (words cut for the console, `log_lines.cut`: the command
                # on a line of its own, never cut, then those words as they were cut)
                said = f"could not start job {job.name}:\n  {list(job.argv)}\n{said}"
            elif not said.startswith(f"could not start job {job.name} "):  # (the local
                # backend's names the job and its command: not said twice)
                said = f"could not start job {job.name} ({list(job.argv)}): {exc}"
            raise LauncherError(f"the {self.backend.name or 'launcher'} backend {said}") from exc
