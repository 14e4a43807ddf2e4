"""`FailurePolicy`: what an ended attempt leads to, for both supervisors (one simulation
per job, `supervisor.Supervisor`, and worker mode), and the reports that name the
failures.

An attempt that finished is logged; one that exited 0 waits for its data; a failure
stops the study if every attempt so far failed alike before any data (`systematic`),
else is restarted (up to `max_restarts`; never one that exited with one of
`final_exit_codes`), then redrawn, abandoned or raised as the
study's `on_failure` says (`supervisor`'s module docstring has the policy in full;
`study_record` the states). The receivers hear of a simulation given up (`give_up`).
Before a failed study's error is written, and before a stop kills the jobs, the jobs
that have exited meanwhile are recorded ended (`reap_exited`), so that its counts hold
no dead process as running and no finished simulation is run again on resume.

Runs on the launcher's thread; the `StudyRecord` is read and changed under the shared
lock only. `failures`, `attempt_of` and `running` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from melissa_trainer.launcher.advice import Advice
from melissa_trainer.launcher.backends.base import Backend
from melissa_trainer.launcher.exit_cause import codes_text, exit_text, own_exit, worker_exit_text
from melissa_trainer.launcher.jobs import RunningJob, Settings
from melissa_trainer.launcher.log_lines import warn
from melissa_trainer.launcher.reports import (
    MAX_SHOWN,
    LauncherError,
    RunningSimulation,
    failure_report,
    repeated_failures,
    running_report,
    study_counts,
)
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.systematic import SystematicFailure
from melissa_trainer.stream.twin_causes import StudyStopping

__all__ = ["FailurePolicy"]

logger = logging.getLogger("melissa_trainer.launcher")


class FailurePolicy:
    """The failure policy and its reports, a base class of the supervisors (which set
    the attributes declared here)."""

    settings: Settings
    backend: Backend
    study: StudyRecord
    lock: threading.Lock
    heartbeat: Callable[[], Mapping[int, int]] | None
    abandon: Callable[[int], None] | None
    redrawn: Callable[[int], None] | None
    jobs: dict[str, RunningJob]
    #: the last log of each simulation not finished (quoted when it fails)
    log_paths: dict[int, Path]
    systematic: SystematicFailure
    advice: Advice
    #: the simulations given up with no callback to tell (`give_up`): the first
    #: `MAX_SHOWN` ids, and how many in all
    unheard: list[int]
    unheard_count: int

    def log_of(self, sid: int) -> Path:
        return self.log_paths.get(sid, self.settings.log_dir / f"sim-{sid}.log")

    def end_simulation(
        self,
        sid: int,
        code: int | str,
        now: float,
        log_path: Path,
        *,
        reported: bool = False,
        node: str | None = None,
    ) -> None:
        """Record the end of an attempt's process, or of its run as its worker
        `reported` it (worker mode), and apply the failure policy; `node`: where it ran
        (`Backend.ran_on`), said in its failure's line (a node that fails every attempt
        is seen in the lines, not only in a scheduler's exclusion warning)."""
        self.log_paths[sid] = log_path
        # (srun's status after its --kill-on-bad-exit is the others' SIGTERM: the code of
        # the task that failed first is the one final_exit_codes is asked about); asked
        # of srun's backend only: another's solver may print such lines and exit 143
        first = own_exit(code, log_path) if self.backend.srun_tasks and not reported else None
        own = None if first is None else (first.code, f"srun: {first}")
        with self.lock:
            started = self.study.records[sid].started
            outcome = self.study.process_ended(sid, now, code, own)
        # (srun's account of its tasks, if any: of srun's backend only, as own_exit; a
        # worker's report is no process's end: its own codes in words)
        ended = (
            worker_exit_text(code)
            if reported
            else exit_text(code, log_path, srun=self.backend.srun_tasks)
        )
        wall = now - started if started is not None else 0.0
        self.advice.ended(sid, code, wall)
        where = "" if node is None else f", on node {node}"
        self.apply_policy(sid, outcome, f"{ended}, {wall:.1f} s{where}", log_path, own)
        if outcome == "finished":  # its log is quoted only if it fails: O(failures) kept
            self.log_paths.pop(sid, None)

    def apply_policy(
        self,
        sid: int,
        outcome: str,
        how: str,
        log_path: Path,
        own: tuple[int, str] | None = None,
    ) -> None:
        """Log an attempt's outcome and act on it (tell the receivers, or raise); `own`:
        `StudyRecord.final_exit`'s."""
        with self.lock:
            record = self.study.records[sid]
            codes, restarts = list(record.exit_codes), record.restarts
            # the attempt's number as its start said (`take`): an attempt killed by a stop
            # (resumed from a checkpoint) has no exit code, so len(codes) would lag
            number = record.attempts - 1
            parameters, redraws = dict(record.parameters), self.study.redraws
            final = self.study.final_exit(codes, own)  # (its record's reason, same words)
        study = self.study  # its limits and policy are fixed: read without the lock
        attempt = f"simulation {sid} attempt {number}"
        if outcome == "finished":
            logger.info("%s finished (%s)", attempt, how)
            return
        if outcome == "exited":
            logger.info("%s exited (%s); waiting for the rest of its data", attempt, how)
            return
        why = self.systematic_cause(sid, codes[-1], log_path)
        if why is not None:
            with self.lock:  # `done` is False from here: the study failed
                self.study.failure = f"the study stopped: {why}"
            self.reap_exited()
            raise LauncherError(f"the study stopped: {why}\n{self.failures()}")
        if outcome == "restart":
            logger.warning(
                "%s failed (%s): restart %d of %d; log: %s",
                attempt,
                how,
                restarts,
                study.max_restarts,
                log_path,
            )
        self.advice.failed(sid, codes)
        if outcome == "restart":
            return
        # its last end said too (`exit_text`: srun's account of its tasks, if any): the
        # line of a simulation given up at its first failure is the only one about it
        history = (
            f"exit codes {codes_text(codes)}, parameters {parameters}; see its log {log_path}; "
            f"its last attempt: {how}"
        )
        times = "once" if len(codes) == 1 else f"{len(codes)} times"
        failed = f"simulation {sid} failed {times} ({history})"
        if final is not None:  # (the record's reason: the study's error lists it too)
            failed += f"; {final}"
        if outcome == "redraw":
            logger.warning(
                "%s: given up, new parameters drawn in its place (redraw %d of at most %d)",
                failed,
                redraws,
                study.max_redraws,
            )
            self.give_up(sid, redraw=True)
        elif outcome == "abandon":
            logger.error("%s: abandoned (LauncherTuning.on_failure='abandon')", failed)
            self.give_up(sid, redraw=False)
        else:
            failure = study.failure
            with self.lock:
                given_up = study.records[sid].status == "abandoned"
            if given_up:  # (the receivers' end-of-run lines said it "runs again": it never does)
                try:
                    self.give_up(sid, redraw=False)
                except Exception as error:  # (the study's failure below is the error to raise)
                    logger.warning("simulation %d abandoned, receivers not told: %s", sid, error)
            self.reap_exited()
            raise LauncherError(f"{failed}, {failure}\n{self.failures()}")

    def stop_for_solver(self, sid: int, why: str, running: list[tuple[str, RunningJob]]) -> None:
        """Stop the study at once if the refusal of `sid` is one that no attempt can fix
        (`why` a `twin_causes.StudyStopping`: its ranks disagree on their communicator,
        which its solver does in every simulation, a rank built on the communicator
        hanging until its silence is timed out); else return. Its `running` jobs are
        killed and recorded ended ("refused", no failure policy applied: not restarted,
        not redrawn), then the study's error names the cause and the fix. Raises
        `LauncherError`."""
        if not isinstance(why, StudyStopping):
            return
        for name, job in running:
            logger.error(  # (the study's error, next, says why: once)
                "simulation %d refused by the receiver, which no attempt can fix; killing "
                "it and stopping the study",
                sid,
            )
            with self.lock:
                self.study.records[sid].reason = why
            said = f"refused by the receiver: {why} No attempt can fix it: the study stops"
            self.backend.kill(job.handle, self.settings.tuning.kill_grace, said)
            del self.jobs[name]
            self.log_paths[sid] = job.log_path
            with self.lock:
                self.study.ended_as_study_failed(sid, time.monotonic(), "refused")
        stop = (
            f"the study stopped: simulation {sid}: {why} Its solver would do the same in "
            f"every simulation: not restarted"
        )
        with self.lock:
            self.study.failure = stop
        self.reap_exited()
        raise LauncherError(f"{stop}\n{self.failures()}")

    def data_arrived(self, sid: int, attempt: int, waited: float) -> None:
        """End the story of an `attempt` of `sid` that ended before its data was all in
        (`apply_policy`'s "waiting for the rest of its data"): the rest arrived, `waited`
        s after its end. (Its other ends: `Supervisor.check_data`'s "did not all arrive",
        naming what the receivers lack; or the study stopped first, the account's
        `exited_line`.)"""
        logger.info(
            "simulation %d attempt %d: the rest of its data arrived, %.1f s after its end: "
            "finished",
            sid,
            attempt,
            waited,
        )

    def reap_exited(self, when: str = "when the study failed") -> None:
        """Record the end of every job whose process has exited, before the study's
        error counts the study and lists the simulations running, and before a stop
        kills the jobs (`Supervisor.shutdown`; `when` says which, in the log line): the
        poll (or the data check, or the silence watch) that fails the study stops at
        its failure, and a stop comes between two polls, so the jobs may have exited
        since the last poll, to be counted "running" and killed dead by the stop
        (recorded "pending": a finished one run again on resume, its work done twice).
        No failure policy is applied to them (`StudyRecord.ended_as_study_failed`:
        exit 0 ends it, any other code leaves it pending with that code kept); a
        worker holding no simulation is left to the stop."""
        now = time.monotonic()
        for name, job in list(self.jobs.items()):
            sid = job.simulation_id
            if sid is None:
                continue
            try:
                code = self.backend.poll(job.handle)
            except Exception as exc:  # (the study's error, or the stop, comes first: it kills it)
                logger.warning("simulation %d: its job's poll failed %s: %r", sid, when, exc)
                continue
            if code is None:
                continue
            del self.jobs[name]
            self.record_ended(job, code, now, when)

    def record_ended(self, job: RunningJob, code: int | str, now: float, when: str) -> None:
        """Record the end of `job`'s attempt found as the study failed or stopped
        (`reap_exited`; a stop's kill that found it ended, `Supervisor.shutdown`), with
        no failure policy applied (`StudyRecord.ended_as_study_failed`); `when` says
        which, in the log line. The job holds a simulation and is out of `jobs`."""
        sid = job.simulation_id
        assert sid is not None
        self.log_paths[sid] = job.log_path
        with self.lock:
            number = self.study.records[sid].attempts - 1
            status = self.study.ended_as_study_failed(sid, now, code)
        logger.info(
            "simulation %d attempt %d had ended too %s (%s): recorded %s, no failure "
            "policy applied",
            sid,
            number,
            when,
            exit_text(code, job.log_path, srun=self.backend.srun_tasks),
            status,
        )

    def systematic_cause(self, sid: int, code: int | str, log_path: Path) -> str | None:
        """Why the study must stop now because every attempt so far failed alike before
        any data (`systematic`), or None."""
        if self.systematic.off:
            return None
        with self.lock:
            counts = self.study.counts()
            reason = self.study.records[sid].reason
        if counts["finished"] + counts["complete"] > 0 or (
            self.heartbeat is not None and any(n > 0 for n in self.heartbeat().values())
        ):
            self.systematic.data_seen()  # (read while the check is on: few simulations)
            return None
        return self.systematic.failed(sid, code, log_path, reason)

    def failures(self) -> str:
        """The study's failures for its error (`reports.failure_report`), then the
        simulations running now. Any thread."""
        with self.lock:
            failed = [
                (sid, self.study.describe(sid), tuple(r.exit_codes))
                for sid, r in sorted(self.study.records.items())
                if r.status in ("failed", "abandoned") or any(c != 0 for c in r.exit_codes)
            ]
            status = {sid: self.study.records[sid].status for sid, _, _ in failed}
            counts = self.study.summary(time.monotonic())
            attempts = sum(len(r.exit_codes) for r in self.study.records.values())
            launched = sum(r.attempts for r in self.study.records.values())
        lines = [study_counts(counts, self.study.n_simulations, attempts, launched)]
        lines += failure_report(failed, self.log_of, self.settings.log_dir, status)
        lines += repeated_failures(failed)
        return "\n".join(lines + self.running())

    def attempt_of(self, sid: int) -> str:
        """ "attempt N, parameters {...}" of a simulation, for messages (any thread)."""
        with self.lock:
            record = self.study.records[sid]
            return f"attempt {record.attempts - 1}, parameters {dict(record.parameters)}"

    def running(self) -> list[str]:
        """The simulations running now (`reports.running_report`). Any thread (a
        best-effort read)."""
        running = [
            (job.simulation_id, job)
            for job in list(self.jobs.values())
            if job.simulation_id is not None
        ]
        running.sort(key=lambda pair: pair[0])  # (by id only: jobs do not compare)
        # the heartbeat now: `job.sending` is as of the last tick, and an attempt that
        # sent since (then failed the study within the tick) read "no message received"
        beats = {} if self.heartbeat is None else self.heartbeat()
        shown = [
            RunningSimulation(
                sid,
                self.attempt_of(sid),
                job.sending or beats.get(sid, job.beat) != job.beat,
                job.silent,
                job.log_path,
            )
            for sid, job in running[:MAX_SHOWN]
        ]
        return running_report(shown, len(running), self.settings.log_dir)

    def give_up(self, sid: int, redraw: bool) -> None:
        """Tell the receivers: `redraw`, a replacement comes (they wait for it instead);
        otherwise the study goes on without this simulation."""
        callback = self.redrawn if redraw else self.abandon
        if callback is None:
            callback = self.abandon  # (a caller that knows only abandon)
        if callback is not None:
            callback(sid)
            return
        # said once in full, then counted (`unheard_summary`): a `Launcher` used on its
        # own has no callback, and a line per failure said the same thing again
        self.unheard_count += 1
        if len(self.unheard) < MAX_SHOWN:
            self.unheard.append(sid)
        if self.unheard_count == 1:
            warn(
                logger,
                f"simulation {sid} given up, but no abandon callback tells the receivers to "
                "stop waiting for it (the next ones are counted and said once when the "
                "launcher stops)",
            )

    def unheard_summary(self) -> None:
        """Log how many simulations were given up with no callback to tell, if more
        than the one `give_up` logged (the launcher's thread, as it stops)."""
        if self.unheard_count > 1:
            more = ", ..." if self.unheard_count > len(self.unheard) else ""
            logger.warning(
                "%d simulations given up in all with no abandon callback to tell the "
                "receivers (%s%s)",
                self.unheard_count,
                ", ".join(map(str, self.unheard)),
                more,
            )
        self.unheard, self.unheard_count = [], 0
