"""Mode "sbatch" of `SlurmBackend`: each job a Slurm batch job.

The trainer submits from a login node or from its own job: each job gets a batch script
(see `script.batch_script`) in `script_dir`, submitted with ``sbatch --parsable``.
Liveness comes from ``squeue`` (one call for all jobs, at most every `poll_every`
seconds; the launcher polls more often and gets the cached answer). The exit code
comes, in this order, from the file the script writes when its command ends (the robust
path: it needs no accounting database), from ``sacct`` (needs slurmdbd), from
``scontrol show job`` (while the controller remembers the job), and last from the final
state alone (COMPLETED -> 0, anything else non-zero): `exit_code`. Each end is counted
against the node the job ran on (squeue's ``%N``): a node that failed ``exclude_after``
attempts in a row is left out of the jobs submitted later (`node_failures`).

`kill` sends SIGTERM to every process of a running job (``scancel --full
--signal=TERM``, which leaves the job running so that its script still records the exit
code; a queued job is just cancelled), waits up to `grace` seconds for it to end, then
runs ``scancel --full --signal=KILL``. Slurm handles that as a cancellation: processes
still alive get SIGKILL after the cluster's ``KillWait`` (30 s by default); `kill` waits
up to FORCE_WAIT seconds for that, and a job still ending after it is reported by a
later `poll` (it counts as running until then).

Batch jobs outlive a trainer killed with SIGKILL: `begin_study` cancels the jobs of an
earlier run of the study, and a lease (`lease`) makes the jobs of a trainer that died
cancel themselves (see `slurm` for the whole story).

Files beside the scripts (`job_files`): each job's exit file, named after its Slurm name
(``mt-<study>-sim-3.<job id>.exit``), read and removed when its end is seen; the file
its script writes as it begins, which tells, after an sbatch whose reply was lost, that
the submission went through even once the job has ended (`SlurmCommands.sbatch`); the
lease. The first launch of a run into a directory removes what an earlier run of the
study left there.

MPICH's segments that killed or cancelled jobs leave in /dev/shm are removed when the
job ran on this host (`segments`); a job cancelled while queued is said in a warning
and in its log, as is a running job that Slurm ended (a time limit, someone's scancel,
a preemption, a node failure); one held or requeued in a warning (`queued_end`), one
over a limit of the cluster's (its time limit above the partition's) too (`limits`).

Used from the backend's one thread; every method may block for the Slurm commands it
runs (bounded by `COMMAND_TIMEOUT` each).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from melissa_trainer.launcher.backends.base import Job, LaunchError, unbuffered_outputs
from melissa_trainer.launcher.backends.lease import Lease
from melissa_trainer.launcher.backends.slurm import job_files as jf
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands, failure
from melissa_trainer.launcher.backends.slurm.exit_code import final_code
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.limits import OverLimit, partition_hint
from melissa_trainer.launcher.backends.slurm.node_failures import FailingNodes
from melissa_trainer.launcher.backends.slurm.queued_end import queue_words, queued_end
from melissa_trainer.launcher.backends.slurm.segments import JobSegments
from melissa_trainer.launcher.exit_cause import exit_text
from melissa_trainer.launcher.log_lines import warn

__all__ = ["CLOSE_GRACE", "FORCE_WAIT", "BatchJobs"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: seconds `kill`/`close` wait for a job to end after ``scancel --signal=KILL``
FORCE_WAIT = 10.0
#: grace of `close` before it forces, in seconds
CLOSE_GRACE = 5.0
#: seconds between ``squeue`` calls while `kill`/`close` wait for jobs to end
WAIT_STEP = 0.25
#: a job still COMPLETING after its scancel (a two-node trial: its node had vanished)
_COMPLETING = (
    ": Slurm waits for its node to confirm the job's end; a node that no longer answers "
    "(sinfo -N: down* or not responding) keeps it so until Slurm marks the node down "
    "(after its SlurmdTimeout) and ends the job. The study does not wait for it"
)

_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]")
#: squeue's states of a job in the queue (again, for one that started: requeued)
_QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


class BatchJobs:
    """The batch jobs of one `SlurmBackend` (options checked by it; see its Args)."""

    def __init__(
        self,
        commands: SlurmCommands,
        *,
        partition: str | None,
        time_limit: str | None,
        extra_args: Sequence[str],
        srun_args: Sequence[str],
        script_dir: Path | None,
        poll_every: float,
        lease_timeout: float | None,
        exclude_after: int | None = None,
    ) -> None:
        self._commands = commands
        self.partition, self.time_limit = partition, time_limit
        self.extra_args, self.srun_args = tuple(extra_args), tuple(srun_args)
        self.script_dir, self.poll_every = script_dir, poll_every
        #: job id -> handle, jobs not known ended (`SlurmBackend.close`: their lines)
        self.live: dict[str, SlurmHandle] = {}
        self._refreshed = -float("inf")  # time.monotonic() of the last squeue answer
        self._answers = 0  # squeue answers so far (`SlurmHandle.seen_started`)
        self._squeue_failing = False
        self._prefix: str | None = None  # the study's job name prefix (begin_study)
        self._lease = Lease(lease_timeout) if lease_timeout is not None else None
        # One lease file per backend (per run of the trainer), not per study: the jobs
        # of a killed run must not be kept alive by the restarted run's renewals.
        self._run_token = f"{os.getpid()}{secrets.token_hex(4)}"
        self._lease_name = f"{ss.JOB_PREFIX}{self._run_token}.lease"
        self._swept: set[Path] = set()  # directories rid of earlier runs' exit files
        self._shm = JobSegments()  # MPICH segments of the jobs that run on this host
        self.over_limit = OverLimit(time_limit)  # jobs that wait over a limit: said once
        self.failing = FailingNodes(
            commands, after=exclude_after, partition=partition, extra_args=self.extra_args
        )

    def poll(self, handle: SlurmHandle) -> int | None:
        """None while the job is queued or running, else its exit code. Runs squeue
        at most every `poll_every` seconds (for all jobs at once)."""
        if handle.code is None:
            if self._refresh():  # fresh states: any killed job Slurm requeued, not only this
                for queued in [h for h in self.live.values() if h.state == "PENDING"]:
                    self._requeued(queued)
            self._settle(handle)
        if handle.code is None and handle.state == "RUNNING":
            self._shm.running(handle.job_id)  # reads its ranks' segments when due
        return handle.code

    def kill_all(self, handles: list[SlurmHandle], grace: float) -> list[int | None]:
        """See `SlurmBackend.kill`: the jobs signalled together, one `grace` for all.
        Each job's exit code if it had ended on its own: the squeue asked just before
        the first scancel listed it ended (or no more), its code read as `poll` reads
        it. Else None, whatever its end after the scancel, 0 included: a solver that
        catches SIGTERM and exits 0 did not finish its simulation (a study without data
        reports would never run it again). What remains: a job that ends on its own
        between that squeue and the scancel counts as killed (run again)."""
        if live := [handle for handle in handles if handle.code is None]:
            self._cancel(live, grace)
        return [None if handle.cancelled else handle.code for handle in handles]

    def close(self) -> None:
        """Cancel every job still queued or running (waits up to CLOSE_GRACE s, then
        forces) and stop renewing the lease; idempotent."""
        if self.live:
            self._cancel(list(self.live.values()), CLOSE_GRACE)
        if self._lease is not None:
            self._lease.close()

    def begin_study(self, study: str) -> None:
        """Name leases after `study` and cancel this user's jobs named after it (an
        earlier run's), logging them; blocks until they ended. A failing squeue is
        logged and nothing is cancelled."""
        prefix = self._prefix = ss.study_prefix(study)
        self._shm.begin(study)  # what a run killed with SIGKILL left on this host
        self._lease_name = f"{prefix}{self._run_token}.lease"
        jobs = self._commands.own_jobs()
        if isinstance(jobs, str):
            warn(
                logger,
                f"cannot list the Slurm jobs of an earlier run of study {study} ({jobs}): "
                f"any still running are not cancelled (scancel them by their names, {prefix}*)",
            )
            return
        stale = [
            SlurmHandle(job=Job(name, ()), job_id=job_id, exit_stem="", state=state, stale=True)
            for job_id, state, name in jobs
            if name.startswith(prefix)
            and state not in sq.TERMINAL_STATES
            and job_id not in self.live
        ]
        if not stale:
            return
        logger.warning(
            "study %s: cancelling %d Slurm job(s) left by an earlier run: %s",
            study,
            len(stale),
            ", ".join(f"{h.job.name} ({h.job_id}, {h.state})" for h in stale),
        )
        self.live.update((handle.job_id, handle) for handle in stale)
        self._cancel(stale, CLOSE_GRACE)

    def describe(self, handle: SlurmHandle) -> str:
        return f"{handle.job.name} (Slurm job {handle.job_id})"

    def launch(self, job: Job, name: str) -> SlurmHandle:
        """Write `job`'s batch script and submit it as Slurm job `name`; returns once
        sbatch has answered. Raises LaunchError with sbatch's message if refused."""
        cwd = Path(job.cwd if job.cwd is not None else os.getcwd()).absolute()
        log = None if job.log_path is None else Path(job.log_path).absolute()
        directory = self.script_dir or (log.parent if log is not None else cwd)
        stem = directory / _FILE_NAME.sub("_", job.name)
        script = stem.with_name(stem.name + ".sbatch")
        # within a study the exit file carries the study's name: its leftovers are found
        # and removed by the study's next run, never another study's (module docstring)
        exit_stem = stem if self._prefix is None else directory / _FILE_NAME.sub("_", name)
        lease = None if self._lease is None else directory / self._lease_name
        began = Path(ss.began_file(str(exit_stem), secrets.token_hex(6)))
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if self._prefix is not None and directory not in self._swept:
                jf.drop_old_files(directory, self._prefix, self.live)
                self._swept.add(directory)
            if lease is not None and self._lease is not None and lease not in self._lease.paths:
                if self._prefix is not None:
                    jf.drop_old_leases(lease, self._prefix)
                self._lease.add(lease)  # before the job can look for it
            text = ss.batch_script(
                name=name,
                argv=job.argv,
                ranks=job.ranks,
                cwd=str(cwd),
                exit_stem=str(exit_stem),
                env=unbuffered_outputs(job.env, os.environ),  # (lines kept by a kill)
                log_path=None if log is None else str(log),
                partition=self.partition,
                time_limit=self.time_limit,
                extra_args=self.failing.args(self.extra_args),  # (with the nodes left out)
                srun_args=self.srun_args,
                lease=None if lease is None else str(lease),
                lease_timeout=self._lease.timeout if self._lease is not None else 0.0,
                began=str(began),
            )
            if log is not None:  # Slurm does not create the directory of --output
                log.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(text)
        except (ValueError, OSError) as exc:
            raise LaunchError(f"cannot write the batch script of job {job.name}: {exc}") from exc
        result, note = self._commands.sbatch(
            str(script), name, cwd, ss.submission_env(os.environ), lambda: jf.read_began(began)
        )
        why = failure(result)
        if why is not None or isinstance(result, str):
            raise LaunchError(
                f"sbatch refused job {job.name} (script {script}): {why}{note}"
                f"{partition_hint(self._commands, why)}"
            )
        try:
            job_id = sq.parse_sbatch(result.stdout)
        except ValueError as exc:
            raise LaunchError(f"job {job.name}: {exc}") from exc
        handle = SlurmHandle(job=job, job_id=job_id, exit_stem=str(exit_stem), began=str(began))
        self.live[job_id] = handle
        logger.debug("submitted %s", self.describe(handle))
        return handle

    def _refresh(self, force: bool = False) -> bool:
        """Ask squeue for the state of every live job (True: it answered now), unless it
        answered less than `poll_every` s ago. A failing squeue leaves the states as they were."""
        if not self.live or (not force and time.monotonic() - self._refreshed < self.poll_every):
            return False
        result = self._commands.run(sq.squeue_command(self.live, self._commands.path("squeue")))
        why = failure(result)
        if why is not None or isinstance(result, str):
            if not self._squeue_failing:  # once per streak of failures
                logger.warning("squeue failed (jobs are kept as they were): %s", why)
            self._squeue_failing = True
            self._refreshed = time.monotonic()  # do not hammer a struggling controller
            return False
        self._squeue_failing, self._refreshed = False, time.monotonic()
        self._answers += 1
        out = result.stdout
        states, reasons = sq.parse_squeue(out), sq.parse_squeue_reasons(out)
        nodes, starts = sq.parse_squeue_nodes(out), sq.parse_squeue_starts(out)
        for job_id, handle in self.live.items():
            state, reason = states.get(job_id), reasons.get(job_id)
            queue_words(handle, self.describe(handle), state, reason, starts.get(job_id))
            if not (handle.cancelled or handle.stale):  # (the study's own: not waited for)
                self.over_limit.see(self.describe(handle), job_id, state, reason)
            handle.state, handle.queried, handle.reason = state, True, reason
            handle.ran = handle.ran or (handle.state in sq.STARTED_STATES - sq.TERMINAL_STATES)
            if state in sq.STARTED_STATES:
                handle.queued_again = handle.queued_again and state in sq.TERMINAL_STATES
                handle.node = nodes.get(job_id, handle.node)
                if handle.seen_started is None:
                    handle.seen_started = self._answers
                if state == "RUNNING":  # (COMPLETING, SIGNALING...: ending, not alive)
                    handle.last_running = self._answers
            elif state == "PENDING":  # (requeued: a new run, perhaps on another node)
                handle.seen_started = None
            if state in _QUEUED:  # (after a start: requeued; its end may come queued)
                handle.queued_again = handle.ran
            if handle.seen_ended is None and (state is None or state in sq.TERMINAL_STATES):
                handle.seen_ended = self._answers
        return True

    def _requeued(self, handle: SlurmHandle) -> None:
        """Cancel again (once) a job this backend cancelled that Slurm put back in the
        queue: a cancel that came while its node failed to launch it is undone by Slurm's
        requeue, the job held ("launch failed requeued held") for a release nobody sends.
        Done at any poll's squeue: the launcher never polls a job it killed."""
        if handle.cancelled and not handle.recancelled:
            handle.recancelled = True
            logger.debug("%s: cancelled again (requeued by Slurm)", self.describe(handle))
            self._commands.scancel([handle.job_id])

    def _settle(self, handle: SlurmHandle) -> None:
        """Set the exit code of a job that squeue reports ended (or no longer lists)."""
        if not handle.queried or (
            handle.state is not None and handle.state not in sq.TERMINAL_STATES
        ):
            return
        handle.final = handle.state
        handle.code = final_code(handle, self.describe(handle), self._commands)
        self.failing.ended(self.describe(handle), handle, self.live.values())
        self.live.pop(handle.job_id, None)
        if handle.began is not None:
            jf.drop(Path(handle.began), "began")
        self._shm.ended(handle.job_id, self.describe(handle))
        queued_end(handle, self.describe(handle), self.time_limit)
        logger.debug(
            "%s ended (%s): %s", self.describe(handle), handle.state, exit_text(handle.code)
        )

    def _cancel(self, handles: list[SlurmHandle], grace: float) -> None:
        """End jobs: SIGTERM to the running ones (plain scancel for the others), up to
        `grace` s for them to end, then SIGKILL and scancel, up to FORCE_WAIT s more.
        Jobs still listed after that are warned of (Slurm goes on ending them). The
        scancels share one `controller_wait` of retries (`SlurmCommands.scancel`)."""
        self._refresh(force=True)
        for handle in handles:
            self._settle(handle)
        live = [h for h in handles if h.code is None]
        running = [h.job_id for h in live if h.state == "RUNNING"]
        self._shm.before_kill(h.job_id for h in live if h.state != "PENDING")
        for handle in live:
            handle.cancelled = True
        others = [h.job_id for h in live if h.state != "RUNNING"]
        # one budget for the outage: a controller away holds a close (or a kill)
        # controller_wait s in all, not that long for each of its scancels; once it is
        # spent on a controller that does not answer, nothing more is asked of it (each
        # command would wait out its own timeout: MessageTimeout, for a frozen one)
        until = self._commands.deadline()
        sent = False

        def scancel(job_ids: list[str], signal: str | None = None) -> None:
            nonlocal sent
            if job_ids and not (sent and self._commands.spent(until)):
                sent = True
                self._commands.scancel(job_ids, signal, until=until)

        # Signal, not cancel, the running ones: the job goes on, so its script writes
        # the exit code once the command has ended.
        scancel(running, "TERM")
        scancel(others)
        for phase, wait in (("term", grace), ("kill", FORCE_WAIT)):
            if phase == "kill":
                live = [h for h in live if h.code is None]
                scancel([h.job_id for h in live], "KILL")
                # and cancel, for a job that was pending (it cannot be signalled)
                scancel([h.job_id for h in live])
            deadline = time.monotonic() + max(0.0, wait)
            while live and not self._commands.spent(until):
                self._refresh(force=True)
                for handle in live:
                    self._settle(handle)
                if all(h.code is not None for h in live) or time.monotonic() >= deadline:
                    break
                time.sleep(WAIT_STEP)
        if self._commands.spent(until) and any(h.code is None for h in handles):
            left = ", ".join(self.describe(h) for h in handles if h.code is None)
            warn(
                logger,
                "the Slurm controller did not answer within controller_wait "
                f"({self._commands.controller_wait:g} s): the scancels sent are processed when "
                f"it answers again; else scancel the jobs by name: {left}",
            )
            return
        for handle in handles:
            if handle.code is None:
                why = _COMPLETING if handle.state == "COMPLETING" else ""
                logger.warning(
                    "%s is still %s after scancel%s", self.describe(handle), handle.state, why
                )
