"""The Slurm backend: each job an ``sbatch`` batch job, or an ``srun`` step of the
current allocation.

``mode="sbatch"`` (the trainer submits from a login node or from its own job): each job
is a batch job, see `batch` (scripts, squeue polling, exit codes, kill).

Batch jobs belong to Slurm, not to the trainer: `close` cancels them, but a trainer
killed with SIGKILL never gets there. So job names carry the study (``mt-<study>-sim-12``,
`script.job_name`); `begin_study`, which the launcher calls before its first
launch, cancels the jobs of an earlier run of the same study (exactly-once ingest makes
re-running them safe); and a lease (`lease_timeout`, see `lease`) makes the jobs of a
trainer that died cancel themselves even if it is never restarted.

A job's environment is the trainer's minus the variables of the allocation or step the
trainer runs in (`script.submission_env`), plus the job's own variables
(``MELISSA_TRAINER_*`` and the launcher's ``env``), which its script exports.

``mode="srun"`` (the trainer runs inside an allocation, ``salloc`` or a batch job):
each job is an ``srun`` step of the allocation, see `steps`.

This module checks the options and hands each call to the mode's object.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from melissa_trainer.launcher.backends.base import (
    CLOSE_REASON,
    Backend,
    Handle,
    Job,
    LaunchError,
    kill_line,
    kill_reasons,
)
from melissa_trainer.launcher.backends.lease import DEFAULT_TIMEOUT, check_lease_timeout
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.batch import CLOSE_GRACE, FORCE_WAIT, BatchJobs
from melissa_trainer.launcher.backends.slurm.commands import (
    CONTROLLER_WAIT,
    SlurmCommands,
    check_controller_wait,
)
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.limits import over_limit_reason
from melissa_trainer.launcher.backends.slurm.node_failures import (
    EXCLUDE_AFTER,
    check_exclude_after,
)
from melissa_trainer.launcher.backends.slurm.queued_end import held_reason
from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle
from melissa_trainer.launcher.backends.slurm.step_stop import PROBE_WAIT, SRUN_END, TERM_WAIT
from melissa_trainer.launcher.backends.slurm.step_tasks import GONE_WAIT
from melissa_trainer.launcher.backends.slurm.steps import SrunSteps

__all__ = ["SlurmBackend"]

_STUDY = re.compile(r"[A-Za-z0-9._]+")


class SlurmBackend(Backend):
    """Jobs as Slurm batch jobs or job steps (see the module docstring).

    Args:
        mode: "sbatch" (a batch job per job) or "srun" (a step per job in the current
            allocation; needs ``SLURM_JOB_ID``, i.e. running under salloc/sbatch).
        partition: ``--partition`` of the batch jobs (mode "sbatch" only).
        time_limit: ``--time`` of each job: minutes (int) or "HH:MM:SS"/"D-HH:MM:SS";
            0 or "UNLIMITED": no limit but the partition's MaxTime.
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
        controller_wait: seconds (>= 0) an sbatch or scancel that cannot reach the
            Slurm controller ("Unable to contact slurm controller", a timeout: a
            controller restart) is retried, with backoff, before its failure counts;
            default `CONTROLLER_WAIT` (5 minutes), 0: never retried. A refusal (an
            invalid partition, a bad option) fails at once. The scancels of one `kill`
            or `close` share one `controller_wait`. Mode "srun": an srun that could
            not reach the controller before any task ran is run again for up to
            `controller_wait` s (`steps`); a step whose task ran never is.
        exclude_after: failed attempts in a row on one node (no success there since)
            after which the batch jobs submitted later leave it out (``sbatch
            --exclude``), said in a WARNING naming the node; default `EXCLUDE_AFTER`
            (2), None: never. A success on the node ends its exclusion; a node is never
            excluded when that would leave the partition none (then no node is, for the
            rest of the run, said in a WARNING); see `node_failures`. Mode "sbatch" only.

    Raises ValueError (naming the parameter) for a bad option, and LaunchError if the
    Slurm commands the mode needs are not on PATH, before anything is submitted.
    Used from one thread (Backend contract); `launch`, `kill` and `close` block for the
    Slurm commands they run (bounded by COMMAND_TIMEOUT each; sbatch and scancel retried
    for up to `controller_wait` s while the controller is unreachable).
    """

    name = "slurm"
    other_hosts = True  # (the compute nodes: the trainer's own on a one-node cluster only)
    srun_tasks = True  # a step (mode "srun"), or the srun of a multi-rank batch job

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
        controller_wait: float = CONTROLLER_WAIT,
        exclude_after: int | None = EXCLUDE_AFTER,
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
        check_lease_timeout("lease_timeout", lease_timeout)
        check_controller_wait(controller_wait)  # (before the commands are looked up)
        check_exclude_after(exclude_after)
        self.mode = mode
        self.partition = partition
        self.time_limit = ss.normalize_time_limit(time_limit)
        if (note := ss.minutes_seconds_note(self.time_limit)) is not None:
            # (said as the backend is made, before any job: "01:30" meant as an hour and
            # a half would end every simulation at 90 s, said only then)
            logging.getLogger("melissa_trainer.launcher").warning(note)
        self.extra_args = ss.check_extra_args("extra_args", extra_args)
        self.srun_args = ss.check_extra_args("srun_args", srun_args)
        self.script_dir = None if script_dir is None else Path(script_dir).absolute()
        self.poll_every = float(poll_every)
        self._commands = SlurmCommands(
            ("sbatch" if mode == "sbatch" else "srun", "squeue", "scancel"),
            ("sacct", "scontrol", "sinfo"),
            f"SlurmBackend(mode={mode!r})",
            controller_wait=controller_wait,
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
        self._batch = (
            BatchJobs(
                self._commands,
                partition=partition,
                time_limit=self.time_limit,
                extra_args=self.extra_args,
                srun_args=self.srun_args,
                script_dir=self.script_dir,
                poll_every=self.poll_every,
                lease_timeout=lease_timeout,
                exclude_after=exclude_after,
            )
            if mode == "sbatch"
            else None
        )
        self._study: str | None = None

    # -- Backend API -----------------------------------------------------------------------

    def launch(self, job: Job) -> Handle:
        """Submit `job` (mode "sbatch", returns once sbatch has answered) or start its
        srun step (mode "srun"). Raises LaunchError with sbatch's message if refused."""
        name = ss.job_name(job.name, self._study)
        if self._steps is not None:
            return self._steps.launch(job, name)
        assert self._batch is not None
        return self._batch.launch(job, name)

    def poll(self, handle: Handle) -> int | None:
        """None while the job is queued or running, else its exit code. Runs squeue
        at most every `poll_every` seconds (for all jobs at once). An srun step that
        `kill` ended never reports 0 (see `steps`)."""
        if isinstance(handle, SrunHandle) and self._steps is not None:
            return self._steps.poll(handle)
        batch, job = self._own(handle)
        return batch.poll(job)

    def started(self, handle: Handle) -> bool:
        """Whether squeue's last answer listed the batch job as running or ended
        (`STARTED_STATES`): not while it is queued, nor before squeue has listed it; an
        srun step counts as started at once."""
        if isinstance(handle, SlurmHandle):
            return handle.state in sq.STARTED_STATES
        return True

    def queue_reason(self, handle: Handle) -> str | None:
        """Why Slurm keeps a batch job PENDING, as squeue's last answer gave it
        (``Resources``, ``Priority``, ``BeginTime``, ``JobHeldUser``...); None for a job
        not pending, or pending for no reason given, and for an srun step. A hold
        (``JobHeldUser``, ``JobHeldAdmin``) is named with its fix, ``scontrol release``
        (`queued_end.held_reason`); a reason over a limit (``PartitionTimeLimit``...), as
        such (`limits.over_limit_reason`)."""
        if isinstance(handle, SlurmHandle) and handle.state == "PENDING":
            return over_limit_reason(handle.reason) or held_reason(handle.reason)
        return None

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        """SIGTERM to every process of the job (a queued job is just cancelled), wait up
        to `grace` s, then ``scancel --signal=KILL`` (a cancellation: Slurm SIGKILLs what
        is left after its KillWait) and wait up to FORCE_WAIT s more for the job to end
        (else a warning; a later `poll` reports its end). Blocks meanwhile. The job's
        exit code if it had ended on its own (`Backend`'s contract; `BatchJobs.kill_all`,
        `SrunSteps.kill` say how each mode tells), else None. `reason`: the launcher's
        line in the log of a job not known ended, before its signal (`kill_line`)."""
        return self.kill_all([handle], grace, None if reason is None else [reason])[0]

    def kill_all(
        self,
        handles: Sequence[Handle],
        grace: float = 5.0,
        reasons: Sequence[str] | None = None,
    ) -> list[int | None]:
        """`kill` of each of `handles`, signalled together, one `grace` for them all
        (batch jobs: their scancels name them all at once; srun steps: one ``scancel
        --signal=TERM`` names them all, then their sruns are signalled, `step_stop`),
        each with its line of `reasons` (`kill`). Results in order."""
        codes: dict[int, int | None] = {}
        steps: list[tuple[int, SrunHandle]] = []
        batch: list[tuple[int, SlurmHandle]] = []
        for i, handle in enumerate(handles):
            if isinstance(handle, SrunHandle) and self._steps is not None:
                steps.append((i, handle))
            else:
                batch.append((i, self._own(handle)[1]))
        self._kill_lines(handles, kill_reasons(handles, reasons), grace)
        if steps and self._steps is not None:
            ended = self._steps.kill_all([step for _, step in steps], grace)
            codes.update(zip((i for i, _ in steps), ended, strict=True))
        if batch and self._batch is not None:
            ended = self._batch.kill_all([job for _, job in batch], grace)
            codes.update(zip((i for i, _ in batch), ended, strict=True))
        return [codes[i] for i in range(len(handles))]

    def _kill_lines(
        self, handles: Sequence[Handle], reasons: Sequence[str | None], grace: float
    ) -> None:
        """The launcher's line (`kill_line`) in the log of each of `handles` that its
        kill ends (not one known ended, nor a batch job cancelled already: its line is
        written once), with its reason, before any signal: the one writer of
        `kill_all`'s lines and `close`'s."""
        for handle, why in zip(handles, reasons, strict=True):
            if isinstance(handle, SrunHandle):
                # (a step waiting out an outage runs nothing, yet its attempt is killed)
                if handle.retry_at is not None or not getattr(handle.process, "ended", True):
                    kill_line(
                        handle.job, why, f"SIGTERM to its tasks, srun killed after {grace:g} s"
                    )
            elif isinstance(handle, SlurmHandle) and handle.code is None and not handle.cancelled:
                # (queued or running: scancel ends it; one cancelled already had its line,
                # and a second close while the controller does not answer said it twice)
                kill_line(handle.job, why, f"scancel: SIGTERM, SIGKILL after {grace:g} s")

    def close(self) -> None:
        """Cancel every job still queued or running (waits up to CLOSE_GRACE s, then
        forces), each first given the launcher's line in its log with `CLOSE_REASON`
        (as a kill's: `kill_line`); idempotent."""
        if self._steps is not None:
            left: list[Handle] = list(self._steps.running)
            self._kill_lines(left, [CLOSE_REASON] * len(left), CLOSE_GRACE)
            self._steps.close()
        if self._batch is not None:
            left = list(self._batch.live.values())
            self._kill_lines(left, [CLOSE_REASON] * len(left), CLOSE_GRACE)
            self._batch.close()

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
        if self._steps is not None:
            prefix = ss.study_prefix(study)
            self._steps.cancel(lambda name: name.startswith(prefix))
        if self._batch is not None:
            self._batch.begin_study(study)

    def stop_bound(self, grace: float) -> float:
        """`Backend.stop_bound`: the grace, the wait for the forced end's `scancel`
        (`FORCE_WAIT`) and one `controller_wait` (the stop's scancels share it). In mode
        "srun" (`SrunSteps.kill_all`, no command retried): the squeue before the stop
        and the tasks' ``scancel --signal=TERM`` (`TERM_WAIT` each at most), the grace
        and the sruns' end (`SRUN_END`), then either the cancel by name's squeue and
        scancel (`TERM_WAIT` each) or, the controller away, the waits for this node's
        tasks to be gone after their SIGKILL (`GONE_WAIT` each: the one after the grace
        of their SIGTERM, `step_tasks.end_tasks`, and that of any left at the end). A
        scancel that timed out adds the squeue asking whether the controller answers
        (`PROBE_WAIT`) and, if it does (a step daemon that does not), the tasks'
        `GONE_WAIT` after their grace before the cancel by name."""
        if self._steps is not None:
            waits = 2 * TERM_WAIT + PROBE_WAIT + GONE_WAIT + 2 * max(TERM_WAIT, GONE_WAIT)
            return grace + SRUN_END + waits
        return grace + FORCE_WAIT + self._commands.controller_wait

    def describe(self, handle: Handle) -> str:
        if isinstance(handle, SlurmHandle) and self._batch is not None:
            return self._batch.describe(handle)
        if isinstance(handle, SrunHandle) and self._steps is not None:
            return self._steps.describe(handle)
        return handle.job.name

    def ran_on(self, handle: Handle) -> str | None:
        """`Backend.ran_on`: a batch job's node as squeue last listed it (``%N``; None
        for a job squeue never saw start, or one on several nodes' list: as listed). A
        step of mode "srun" runs where Slurm placed its tasks: None (not asked)."""
        if isinstance(handle, SlurmHandle):
            return handle.node
        return None

    def _own(self, handle: Handle) -> tuple[BatchJobs, SlurmHandle]:
        """The batch jobs `handle` belongs to, and it; TypeError for a foreign handle."""
        if not isinstance(handle, SlurmHandle) or self._batch is None:
            raise TypeError(f"not a handle of this SlurmBackend: {handle!r}")
        return self._batch, handle
