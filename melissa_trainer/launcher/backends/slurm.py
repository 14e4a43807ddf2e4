"""The Slurm backend: each job an ``sbatch`` batch job, or an ``srun`` step of the
current allocation.

``mode="sbatch"`` (the trainer submits from a login node or from its own job): each job
gets a batch script (see `slurm_script.batch_script`) in `script_dir`, submitted with
``sbatch --parsable``. Liveness comes from ``squeue`` (one call for all jobs, at most
every `poll_every` seconds; the launcher polls more often and gets the cached answer).
The exit code comes, in this order, from the file the script writes when its command
ends (the robust path: it needs no accounting database), from ``sacct`` (needs
slurmdbd), from ``scontrol show job`` (while the controller remembers the job), and
last from the final state alone (COMPLETED -> 0, anything else non-zero).
`kill` sends SIGTERM to every process of a running job (``scancel --full
--signal=TERM``, which leaves the job running so that its script still records the exit
code; a queued job is just cancelled), waits up to `grace` seconds for it to end, then
runs ``scancel --full --signal=KILL``. Slurm handles that as a cancellation: processes
still alive get SIGKILL after the cluster's ``KillWait`` (30 s by default); `kill` waits
up to FORCE_WAIT seconds for that, and a job still ending after it is reported by a
later `poll` (it counts as running until then).

Batch jobs belong to Slurm, not to the trainer: `close` cancels them, but a trainer
killed with SIGKILL never gets there. So job names carry the study (``mt-<study>-sim-12``,
`slurm_script.job_name`); `begin_study`, which the launcher calls before its first
launch, cancels the jobs of an earlier run of the same study (exactly-once ingest makes
re-running them safe); and a lease (`lease_timeout`, see `lease`) makes the jobs of a
trainer that died cancel themselves even if it is never restarted.

A job's environment is the trainer's minus the variables of the allocation or step the
trainer runs in (`slurm_script.submission_env`), plus the job's own variables
(``MELISSA_TRAINER_*`` and the launcher's ``env``), which its script exports.

``mode="srun"`` (the trainer runs inside an allocation, ``salloc`` or a batch job):
each job is an ``srun`` step of the allocation, see `slurm_steps`.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.launcher.backends import slurm_script as ss
from melissa_trainer.launcher.backends.base import Backend, Handle, Job, LaunchError
from melissa_trainer.launcher.backends.lease import DEFAULT_TIMEOUT, Lease, check_timeout
from melissa_trainer.launcher.backends.slurm_commands import (
    COMMAND_TIMEOUT,
    SlurmCommands,
    failure,
)
from melissa_trainer.launcher.backends.slurm_steps import SrunHandle, SrunSteps

__all__ = ["COMMAND_TIMEOUT", "SlurmBackend", "SlurmHandle", "SrunHandle"]

logger = logging.getLogger(__name__)

#: seconds `kill`/`close` wait for a job to end after ``scancel --signal=KILL``
FORCE_WAIT = 10.0
#: grace of `close` before it forces, in seconds
CLOSE_GRACE = 5.0
#: seconds between ``squeue`` calls while `kill`/`close` wait for jobs to end
WAIT_STEP = 0.25

_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_STUDY = re.compile(r"[A-Za-z0-9._]+")


@dataclass(eq=False)
class SlurmHandle(Handle):
    """A submitted batch job (``mode="sbatch"``)."""

    job: Job
    job_id: str
    exit_stem: str
    state: str | None = None  # last state squeue gave; None: not listed (yet, or any more)
    queried: bool = False  # squeue has answered at least once since the submission
    code: int | None = None  # exit code once the job has ended
    stale: bool = False  # a job of an earlier run of the study (see begin_study)


class SlurmBackend(Backend):
    """Jobs as Slurm batch jobs or job steps (see the module docstring).

    Args:
        mode: "sbatch" (a batch job per job) or "srun" (a step per job in the current
            allocation; needs ``SLURM_JOB_ID``, i.e. running under salloc/sbatch).
        partition: ``--partition`` of the batch jobs (mode "sbatch" only).
        time_limit: ``--time`` of each job: minutes (int) or "HH:MM:SS"/"D-HH:MM:SS".
        extra_args: more options of the submitting command, e.g. ``["--mem=4G",
            "--account=abc"]``: ``#SBATCH`` lines in mode "sbatch", srun options in
            mode "srun".
        script_dir: where batch scripts and exit-code files go (must be visible from
            the compute nodes); None: the directory of each job's log (else its cwd).
        poll_every: seconds between two ``squeue`` calls; polls in between get the
            cached state.
        srun_args: options of every srun that starts a job's ranks (the one in the
            batch script of a multi-rank job, or the step in mode "srun"), e.g.
            ``["--mpi=pmi2"]``.
        lease_timeout: seconds (>= `lease.MIN_TIMEOUT`) after which a batch job whose
            trainer has stopped renewing its lease cancels itself (see the module
            docstring); None: no lease. The script directory must then be shared with
            the compute nodes (where it is not, the jobs say so in their logs and run
            without lease). Mode "sbatch" only: steps die with their allocation.

    Raises ValueError (naming the parameter) for a bad option, and LaunchError if the
    Slurm commands the mode needs are not on PATH, before anything is submitted.
    Used from one thread (Backend contract); `launch`, `kill` and `close` block for the
    Slurm commands they run (bounded by COMMAND_TIMEOUT each).
    """

    name = "slurm"

    def __init__(
        self,
        mode: str = "sbatch",
        partition: str | None = None,
        time_limit: int | str | None = None,
        extra_args: Sequence[str] = (),
        script_dir: str | os.PathLike[str] | None = None,
        poll_every: float = 2.0,
        *,
        srun_args: Sequence[str] = (),
        lease_timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        if mode not in ("sbatch", "srun"):
            raise ValueError(f"mode must be 'sbatch' or 'srun', got {mode!r}")
        if partition is not None and (not isinstance(partition, str) or not partition.strip()):
            raise ValueError(f"partition must be a non-empty string or None, got {partition!r}")
        if partition is not None and mode == "srun":
            raise ValueError(
                "partition applies to mode='sbatch'; in mode='srun' the steps run in the "
                "current allocation (choose its partition with salloc/sbatch)"
            )
        if not poll_every >= 0:
            raise ValueError(f"poll_every must be >= 0 seconds, got {poll_every!r}")
        check_timeout("lease_timeout", lease_timeout)
        self.mode = mode
        self.partition = partition
        self.time_limit = ss.normalize_time_limit(time_limit)
        self.extra_args = ss.check_extra_args("extra_args", extra_args)
        self.srun_args = ss.check_extra_args("srun_args", srun_args)
        self.script_dir = None if script_dir is None else Path(script_dir).absolute()
        self.poll_every = float(poll_every)
        self._commands = SlurmCommands(
            ("sbatch" if mode == "sbatch" else "srun", "squeue", "scancel"),
            ("sacct", "scontrol"),
            f"SlurmBackend(mode={mode!r})",
        )
        allocation = os.environ.get("SLURM_JOB_ID", "").strip()
        if mode == "srun" and not allocation:
            raise LaunchError(
                "SlurmBackend(mode='srun') runs job steps in the current allocation, but "
                "SLURM_JOB_ID is not set: start the trainer under salloc or sbatch, or use "
                "mode='sbatch'"
            )
        self._steps = (
            SrunSteps(
                self._commands, allocation, self.time_limit, (*self.extra_args, *self.srun_args)
            )
            if mode == "srun"
            else None
        )
        self._live: dict[str, SlurmHandle] = {}  # job id -> handle, jobs not known ended
        self._refreshed = -float("inf")  # time.monotonic() of the last squeue answer
        self._squeue_failing = False
        self._study: str | None = None
        self._lease = (
            Lease(lease_timeout) if lease_timeout is not None and mode == "sbatch" else None
        )
        # One lease file per backend (per run of the trainer), not per study: the jobs
        # of a killed run must not be kept alive by the restarted run's renewals.
        self._run_token = f"{os.getpid()}{secrets.token_hex(4)}"
        self._lease_name = f"{ss.JOB_PREFIX}{self._run_token}.lease"

    # -- Backend API -----------------------------------------------------------------------

    def launch(self, job: Job) -> Handle:
        """Submit `job` (mode "sbatch", returns once sbatch has answered) or start its
        srun step (mode "srun"). Raises LaunchError with sbatch's message if refused."""
        if self._steps is not None:
            return self._steps.launch(job, ss.job_name(job.name, self._study))
        return self._submit(job)

    def poll(self, handle: Handle) -> int | None:
        """None while the job is queued or running, else its exit code. Runs squeue
        at most every `poll_every` seconds (for all jobs at once)."""
        if isinstance(handle, SrunHandle) and self._steps is not None:
            return self._steps.poll(handle)
        slurm = self._own(handle)
        if slurm.code is None:
            self._refresh()
            self._settle(slurm)
        return slurm.code

    def kill(self, handle: Handle, grace: float = 5.0) -> None:
        """SIGTERM to every process of the job (a queued job is just cancelled), wait up
        to `grace` s, then ``scancel --signal=KILL`` (a cancellation: Slurm SIGKILLs what
        is left after its KillWait) and wait up to FORCE_WAIT s more for the job to end
        (else a warning; a later `poll` reports its end). Blocks meanwhile."""
        if isinstance(handle, SrunHandle) and self._steps is not None:
            self._steps.kill(handle, grace)
            return
        slurm = self._own(handle)
        if slurm.code is None:
            self._cancel([slurm], grace)

    def close(self) -> None:
        """Cancel every job still queued or running (waits up to CLOSE_GRACE s, then
        forces); idempotent."""
        if self._steps is not None:
            self._steps.close()
            return
        if self._live:
            self._cancel(list(self._live.values()), CLOSE_GRACE)
        if self._lease is not None:
            self._lease.close()

    def begin_study(self, study: str) -> None:
        """Name the jobs after `study` from now on (``mt-<study>-<name>``) and end the
        jobs an earlier run of it left (this user's jobs, or in mode "srun" the steps of
        this allocation, whose name starts with ``mt-<study>-``), logging each. Blocks
        until they have ended (as `close`: up to CLOSE_GRACE + FORCE_WAIT s). If squeue
        fails, that is logged and nothing is cancelled.

        Do not run two trainers on one study directory: the second one cancels the
        first one's jobs."""
        if not isinstance(study, str) or not _STUDY.fullmatch(study):
            raise ValueError(
                f"study must be letters, digits, '.' or '_' (no '-': it ends the job name "
                f"prefix), got {study!r}"
            )
        self._study = study
        self._lease_name = f"{ss.study_prefix(study)}{self._run_token}.lease"
        prefix = ss.study_prefix(study)
        if self._steps is not None:
            self._steps.cancel(lambda name: name.startswith(prefix))
            return
        jobs = self._commands.own_jobs()
        if isinstance(jobs, str):
            logger.warning(
                "cannot list the Slurm jobs of an earlier run of study %s (%s): any still "
                "running are not cancelled (scancel them by their names, %s*)",
                study,
                jobs,
                prefix,
            )
            return
        stale = [
            SlurmHandle(job=Job(name, ()), job_id=job_id, exit_stem="", state=state, stale=True)
            for job_id, state, name in jobs
            if name.startswith(prefix)
            and state not in ss.TERMINAL_STATES
            and job_id not in self._live
        ]
        if not stale:
            return
        logger.warning(
            "study %s: cancelling %d Slurm job(s) left by an earlier run: %s",
            study,
            len(stale),
            ", ".join(f"{h.job.name} ({h.job_id}, {h.state})" for h in stale),
        )
        self._live.update((handle.job_id, handle) for handle in stale)
        self._cancel(stale, CLOSE_GRACE)

    def describe(self, handle: Handle) -> str:
        if isinstance(handle, SlurmHandle):
            return f"{handle.job.name} (Slurm job {handle.job_id})"
        if isinstance(handle, SrunHandle) and self._steps is not None:
            return self._steps.describe(handle)
        return handle.job.name

    # -- sbatch mode -----------------------------------------------------------------------

    def _submit(self, job: Job) -> SlurmHandle:
        cwd = Path(job.cwd if job.cwd is not None else os.getcwd()).absolute()
        log = None if job.log_path is None else Path(job.log_path).absolute()
        directory = self.script_dir or (log.parent if log is not None else cwd)
        stem = directory / _FILE_NAME.sub("_", job.name)
        script = stem.with_name(stem.name + ".sbatch")
        lease = None if self._lease is None else directory / self._lease_name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if lease is not None and self._lease is not None and lease not in self._lease.paths:
                self._drop_old_leases(lease)
                self._lease.add(lease)  # before the job can look for it
            text = ss.batch_script(
                name=ss.job_name(job.name, self._study),
                argv=job.argv,
                ranks=job.ranks,
                cwd=str(cwd),
                exit_stem=str(stem),
                env=job.env,
                log_path=None if log is None else str(log),
                partition=self.partition,
                time_limit=self.time_limit,
                extra_args=self.extra_args,
                srun_args=self.srun_args,
                lease=None if lease is None else str(lease),
                lease_timeout=self._lease.timeout if self._lease is not None else 0.0,
            )
            if log is not None:  # Slurm does not create the directory of --output
                log.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(text)
        except (ValueError, OSError) as exc:
            raise LaunchError(f"cannot write the batch script of job {job.name}: {exc}") from exc
        result = self._commands.run(
            ss.sbatch_command(str(script), self._commands.path("sbatch")),
            cwd=cwd,
            env=ss.submission_env(os.environ),
        )
        why = failure(result)
        if why is not None or isinstance(result, str):
            raise LaunchError(f"sbatch refused job {job.name} (script {script}): {why}")
        try:
            job_id = ss.parse_sbatch(result.stdout)
        except ValueError as exc:
            raise LaunchError(f"job {job.name}: {exc}") from exc
        handle = SlurmHandle(job=job, job_id=job_id, exit_stem=str(stem))
        self._live[job_id] = handle
        logger.debug("submitted %s", self.describe(handle))
        return handle

    def _refresh(self, force: bool = False) -> None:
        """Ask squeue for the state of every live job, unless it answered less than
        `poll_every` s ago. A failing squeue leaves the states as they were."""
        if not self._live or (not force and time.monotonic() - self._refreshed < self.poll_every):
            return
        result = self._commands.run(ss.squeue_command(self._live, self._commands.path("squeue")))
        why = failure(result)
        if why is not None or isinstance(result, str):
            if not self._squeue_failing:  # once per streak of failures
                logger.warning("squeue failed (jobs are kept as they were): %s", why)
            self._squeue_failing = True
            self._refreshed = time.monotonic()  # do not hammer a struggling controller
            return
        self._squeue_failing = False
        self._refreshed = time.monotonic()
        states = ss.parse_squeue(result.stdout)
        for job_id, handle in self._live.items():
            handle.state, handle.queried = states.get(job_id), True

    def _settle(self, handle: SlurmHandle) -> None:
        """Set the exit code of a job that squeue reports ended (or no longer lists)."""
        if not handle.queried or (
            handle.state is not None and handle.state not in ss.TERMINAL_STATES
        ):
            return
        handle.code = self._final_code(handle)
        self._live.pop(handle.job_id, None)
        logger.debug(
            "%s ended (%s): exit code %d", self.describe(handle), handle.state, handle.code
        )

    def _final_code(self, handle: SlurmHandle) -> int:
        if handle.stale:  # cancelled, not run by this backend: no code to look up
            return 1
        path = Path(ss.exit_file(handle.exit_stem, handle.job_id))
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            logger.warning("cannot read the exit code of %s: %s", self.describe(handle), exc)
            text = ""
        if text:
            path.unlink(missing_ok=True)
            try:
                return int(text)
            except ValueError:
                logger.warning("%s holds %r, not an exit code", path, text)
        record = self._commands.record(handle.job_id)
        if record is not None:
            return ss.exit_code(*record)
        if handle.state is not None:
            return ss.exit_code(handle.state)
        logger.warning(
            "%s left the queue without an exit code (purged, or lost by the controller); "
            "counted as failed",
            self.describe(handle),
        )
        return 1

    def _cancel(self, handles: list[SlurmHandle], grace: float) -> None:
        """End jobs: SIGTERM to the running ones (plain scancel for the others), up to
        `grace` s for them to end, then SIGKILL and scancel, up to FORCE_WAIT s more.
        Jobs still listed after that are warned of (Slurm goes on ending them)."""
        self._refresh(force=True)
        for handle in handles:
            self._settle(handle)
        live = [h for h in handles if h.code is None]
        running = [h.job_id for h in live if h.state == "RUNNING"]
        others = [h.job_id for h in live if h.state != "RUNNING"]
        # Signal, not cancel, the running ones: the job goes on, so its script writes
        # the exit code once the command has ended.
        self._commands.scancel(running, "TERM")
        self._commands.scancel(others)
        for phase, wait in (("term", grace), ("kill", FORCE_WAIT)):
            if phase == "kill":
                live = [h for h in live if h.code is None]
                self._commands.scancel([h.job_id for h in live], "KILL")
                # and cancel, for a job that was pending (it cannot be signalled)
                self._commands.scancel([h.job_id for h in live])
            deadline = time.monotonic() + max(0.0, wait)
            while live:
                self._refresh(force=True)
                for handle in live:
                    self._settle(handle)
                if all(h.code is not None for h in live) or time.monotonic() >= deadline:
                    break
                time.sleep(WAIT_STEP)
        for handle in handles:
            if handle.code is None:
                logger.warning("%s is still %s after scancel", self.describe(handle), handle.state)

    def _drop_old_leases(self, lease: Path) -> None:
        """Remove the lease files of earlier runs of the study beside `lease`: jobs of
        theirs still running (if `begin_study` could not cancel them) cancel themselves
        after the timeout."""
        if self._study is None:
            return
        for old in lease.parent.glob(f"{ss.study_prefix(self._study)}*.lease"):
            if old != lease:
                logger.debug("removing the lease of an earlier run: %s", old)
                old.unlink(missing_ok=True)

    # -- helpers ---------------------------------------------------------------------------

    def _own(self, handle: Handle) -> SlurmHandle:
        if not isinstance(handle, SlurmHandle):
            raise TypeError(f"not a handle of this SlurmBackend: {handle!r}")
        return handle
