"""`SilenceWatch`: how the supervisors hear from their simulations, a base class of them
(`supervisor.Supervisor`, and worker mode's through it).

The heartbeat is ``heartbeat()[simulation_id]`` (the messages the receivers have from
it, `refresh_beats`), read at each tick: a simulation whose count moved was heard
from. `check_timeouts` kills each simulation silent past its bound (`silence.SilenceClock`
judges: only its own silence counts, not the trainer's pauses nor its back-pressure, and
not the time a scheduler still queues its job), naming it with its attempt and log, and
ends the attempt as "timeout" (`job_killed`: the failure policy then restarts, redraws,
abandons or raises). Without a heartbeat callable the silence is the time since launch.
`note_startups` and `started_sending` time each attempt's start-up (launch, or in worker
mode its assignment, to its first message) for `advice`, which says once per study when
start-up dominates.

Runs on the launcher's thread; the `StudyRecord` is read under the shared lock only,
the backend's calls (a kill may block up to `kill_grace`) are made outside it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from melissa_trainer.launcher.backends.base import Backend
from melissa_trainer.launcher.failure_policy import FailurePolicy
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.reports import DataReport
from melissa_trainer.launcher.silence import SilenceClock

__all__ = ["SilenceWatch"]

logger = logging.getLogger("melissa_trainer.launcher")


class SilenceWatch(FailurePolicy):
    """The heartbeat, the silence watch and the start-up timing of the supervisors
    (which set the attributes declared here)."""

    backend: Backend
    data: DataReport | None
    silence: SilenceClock
    #: the last heartbeat read (`refresh_beats`)
    _beats: Mapping[int, int]

    def check_timeouts(self, now: float) -> None:
        """Kill the simulations silent past their bound (`silence`: only their own
        silence counts, not the trainer's pauses nor its back-pressure). With a
        heartbeat, each job's `sending` and `silent` are kept whatever the timeout
        (`simulation_timeout=None` too: only the kills are off)."""
        reading = self.data is None or not self.data.backpressured()
        elapsed = self.silence.tick(now, reading)
        if not self.silence.enabled and self.heartbeat is None:
            return
        beats = self.refresh_beats()
        self.note_startups(now, beats)
        doomed: list[tuple[str, RunningJob, str, str]] = []  # (killed together, below)
        for name, job in list(self.jobs.items()):
            sid = job.simulation_id
            if sid is None:
                continue
            # (whatever the timeout: `sending` and `silent` are what the stream's excuse,
            # the failed study's list of those running and the start-up timing read)
            # (read at every tick, a message heard or not: a job listed running for
            # one squeue answer only, sending all along, is known to have run)
            started = self.backend.started(job.handle)
            if started:
                job.ran, job.back_in_queue = True, False
            if self.heartbeat is not None and beats.get(sid, 0) != job.beat:
                self.silence.heard(job.silent + elapsed, first=not job.sending)
                if job.sending:
                    job.gap = max(job.gap or 0.0, job.silent + elapsed)
                job.beat, job.silent, job.sending = beats.get(sid, 0), 0.0, True
                continue
            if not started:
                if job.ran:  # (its backend saw it run, and now queued again: `requeued`)
                    self.requeued(job)
                if job.back_in_queue or not job.sending:
                    continue  # queued by a scheduler: waiting, not silent
                # else: it sent, so it runs, though its backend does not list it started
                # yet (squeue's next answer comes every `poll_every`): not a requeue, its
                # silence counts
            job.silent += elapsed
            if not self.silence.enabled:
                continue  # (no bound to judge: `simulation_timeout=None`)
            with self.lock:  # (its data complete: it is ending, `silence` says how long)
                job.complete = self.study.records[sid].status == "complete"
            verdict = self.silence.judge(job.silent, job.sending, job.complete)
            if verdict is None:
                continue
            heard = "since its last message" if job.sending else "no message yet"
            what = f"simulation {sid} ({self.attempt_of(sid)}) silent for {verdict.silent:.1f} s"
            # (between two messages, both directions: how to wait longer is in the rule,
            # how to catch a hang sooner from the gaps seen; the restart's advice too,
            # this kill's: "" for one before its first message, where a lower floor
            # changes nothing; before, such a restart repeated its previous kill's hint)
            sooner = ""
            if job.sending and not job.complete:
                sooner = self.silence.sooner(job.gap, verdict.timeout)
            self.advice.hang_sooner[sid] = sooner
            logger.warning(
                "%s (%s; %s%s): killing %s; log: %s",
                what,
                heard,
                verdict.rule,
                sooner,
                self.backend.describe(job.handle),
                job.log_path,
            )
            # the job's log gets the short of it (the line ran to 518 characters in
            # test_job_log_launcher_lines' log, most of them the rule and the parameters,
            # which the WARNING says): what, how long silent, the bound, the setting
            since = "since its last message" if job.sending else "before its first message"
            why = (
                f"hung: simulation {sid} silent {verdict.silent:.1f} s {since} (bound "
                f"{verdict.timeout:.1f} s; LauncherTuning({verdict.setting}=...) to wait longer)"
            )
            doomed.append((name, job, verdict.rule, why))
        # one kill_grace for them all (`Backend.kill_all`): a wave of hung solvers held
        # the launcher's thread a grace per job, nothing launched or polled meanwhile
        handles = [job.handle for _, job, _, _ in doomed]
        grace = self.settings.tuning.kill_grace
        self.backend.kill_all(handles, grace, [why for _, _, _, why in doomed])
        for name, job, rule, _ in doomed:
            del self.jobs[name]
            # (the study's report, if every attempt dies so, names this bound and its fix)
            self.systematic.timeout_rule = rule
            self.job_killed(job, time.monotonic())

    @staticmethod
    def requeued(job: RunningJob) -> None:
        """`job`'s backend said it started at a tick (`RunningJob.ran`), then not started:
        its scheduler put it back in the queue (a Slurm requeue: ``scontrol requeue``, a
        node failure under ``JobRequeue=1``; the backend says it, naming the job and its
        node) or holds it (suspended). The same attempt goes on: nothing is counted. Its
        wait there is not its silence (a requeued batch job waits at least Slurm's
        ``cred_expire``, 120 s by default, more in a busy queue: it was killed as hung
        once `simulation_timeout` of it had passed, a restart counted while Slurm ran it
        again), and its rerun starts from scratch: until its next message it is judged as
        a start-up is (`SilenceClock`'s start-up bound). Its rerun reads
        ``SLURM_RESTART_COUNT`` and skips the steps its receivers hold (`client.rerun`);
        its first step, sent again at once, is its receiver's to drop.
        Not a job that sent before its backend ever listed it
        started: squeue's answers lag (`poll_every`), its first message often comes
        first; that job runs on. `ran` is cleared (the rerun's own first message may come
        before squeue lists it running again: not a second requeue) and `back_in_queue`
        set until its backend says it started again."""
        job.sending, job.silent, job.complete = False, 0.0, False
        job.ran, job.back_in_queue = False, True

    def note_startups(self, now: float, beats: Mapping[int, int]) -> None:
        """Time the start-up of the attempts whose first message came since the last
        tick (`started_sending`)."""
        for job in self.jobs.values():
            sid = job.simulation_id
            if sid is None or job.startup is not None:
                continue
            heard = beats.get(sid, 0) != job.beat
            if not heard and not job.sending and not self.backend.started(job.handle):
                # queued by a scheduler: its start-up begins when it runs (a batch job
                # held in the queue is not a slow solver, nor a case for worker mode)
                job.since = job.quiet_at = now
                continue
            # (a first message heard while its backend does not list it started yet,
            # squeue lagging: it ran since the last tick, timed from there)
            if heard:
                self.started_sending(job, sid)
            else:
                job.quiet_at = now

    def started_sending(self, job: RunningJob, sid: int) -> None:
        """Time the attempt's start-up: from its launch (in worker mode, its assignment)
        to its first message, as the receiver timed that message's arrival when the
        message is this attempt's (a simulation's first attempt: exact however late
        this thread's tick comes, on a loaded machine); else (a restart, whose
        simulation's first message was its previous attempt's, or no receiver's report)
        to the last tick that found no message of it (a lower bound, to within a poll
        interval, longer when the launcher's thread is held up)."""
        first = None if self.data is None else self.data.first_message_at(sid)
        if first is None or first < job.since:  # (not this attempt's message)
            first = job.quiet_at
        job.startup = first - job.since
        client = None if self.data is None else self.data.client_of(sid)
        with self.lock:  # (an attempt after its first skips held steps: `Advice`)
            rerun = self.study.records[sid].attempts > 1
        self.advice.first_message(sid, job.startup, client, rerun=rerun)

    def job_killed(self, job: RunningJob, now: float, code: str = "timeout") -> None:
        assert job.simulation_id is not None
        where = self.backend.ran_on(job.handle)
        self.end_simulation(job.simulation_id, code, now, job.log_path, node=where)

    def refresh_beats(self) -> Mapping[int, int]:
        if self.heartbeat is not None:
            self._beats = self.heartbeat()  # a fresh mapping (`Receiver.activity`)
        return self._beats

    def beat_of(self, sid: int) -> int:
        """The heartbeat value now: the baseline of an attempt that starts, so that only
        its own messages count as heard from it (a restart's earlier attempts' count is
        in the heartbeat). Read with any `simulation_timeout`, None too: the start-up
        timing and a failed study's list of those running read it (with a baseline of 0
        a restart that had sent nothing read "messages received")."""
        if self.heartbeat is None:
            return 0
        return self.refresh_beats().get(sid, 0)
