"""What a launcher backend is: start a job, poll it, kill it.

A *job* is one process tree that runs simulations: one simulation (the usual case), or
a long-lived worker that asks the launcher for one set of parameters after another.
The launcher decides *when* (how many at once, restarts, timeouts, redraws); a backend
only knows *how* (a local process, an ``mpiexec`` job, a Slurm step or batch job).

Contract for every backend:

* `launch` returns at once (it never waits for the job to finish) and raises
  `LaunchError` if the job could not be started at all.
* `poll` never blocks for long: it returns None while the job runs and its exit code
  once it has ended (0: success; anything else, including death by a signal or a
  cancelled batch job, is a failure).
* `kill` ends the whole process tree of the job (the job's own children included),
  asks politely first (SIGTERM, ``scancel``), waits up to ``grace`` seconds, then
  forces; it is idempotent and safe on a job that already ended. It returns the job's
  exit code (as `poll` gives it) when the job had ended on its own, not by the kill:
  ended before the kill signalled it (since the caller's last `poll`: the backend's
  own look just before its signal tells). None when the kill ended it: any end after
  the signal, exit 0 included (a solver that catches SIGTERM and exits 0 has not
  finished its simulation, and a study without data reports would never run it
  again), or when the backend cannot tell (a backend that returns nothing says that:
  its jobs count as killed). What remains: a job that ended on its own between the
  backend's last look and its signal counts as killed (run again). Given a `reason`
  (why the launcher kills it: hung, refused, the study's stop...), a job still running
  gets a launcher line in its log before its signal (`kill_line`): what the kill does
  and why, so that its log does not end mute; None (a backend's own inner kills): none.
* `close` kills every job still running; after it, no process started by this
  backend is left. It is idempotent.
* `begin_study` is called by the launcher once, before its first `launch`, with the
  study's identity (`study_id`). A backend whose jobs can outlive a killed trainer
  (Slurm batch jobs) names its jobs after the study and ends, there, the jobs that an
  earlier run of the same study left behind; the local and mpiexec backends remove the
  MPICH segments that an earlier run's jobs left on this node
  (`mpich_record.SegmentRecord`).

Backends are used from one thread (the launcher's).
"""

from __future__ import annotations

import hashlib
import os
import shlex
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from melissa_trainer.launcher.log_lines import launcher_line


def study_id(study_dir: str | os.PathLike[str]) -> str:
    """The identity of the study run in `study_dir`: 8 hex digits of the SHA-256 of the
    directory's resolved path (symbolic links followed), so the same on every restart of
    the study from the same directory, and different for another directory."""
    path = os.path.realpath(os.fspath(study_dir))
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8]


#: set to 1 in a job's environment unless the trainer's or the job's own sets it
#: (`unbuffered_env`)
UNBUFFERED = "PYTHONUNBUFFERED"


def unbuffered_env(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`env` (a job's own variables) with ``PYTHONUNBUFFERED=1`` added, unless `env` or
    `environ` (the trainer's, which the job inherits) sets it: then as they say.

    A job's output goes to its log, a file, where Python buffers stdout in blocks
    (8 KiB): a process killed without a flush loses the lines it printed since its
    last one. After a node vanished mid-study (every process there SIGKILLed), the
    attempt's log was found empty: a Python solver's lines now reach the log as they
    are printed (every backend's jobs: `Job.full_env` for the local and mpiexec ones,
    the submission for Slurm's). Other languages' runtimes buffer too: gfortran's units
    are unbuffered by `FORTRAN_UNBUFFERED` (`unbuffered_outputs`); C's stdio has no
    such switch, so a C solver that wants its lines kept sets its stdout line-buffered
    or flushes them itself.
    """
    if UNBUFFERED in env or UNBUFFERED in environ:
        return dict(env)
    return {UNBUFFERED: "1", **env}


#: set to ``y`` in every job's environment unless the trainer's or the job's own sets
#: it (`unbuffered_outputs`): gfortran's runtime then writes each line of the
#: preconnected units (``print``, ``write(*,...)``, units 6 and 0) as it is written,
#: where a unit on a file is block-buffered and a SIGTERMed solver left an empty log
FORTRAN_UNBUFFERED = "GFORTRAN_UNBUFFERED_PRECONNECTED"


def unbuffered_outputs(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`env` (a job's own variables) with ``PYTHONUNBUFFERED=1`` (`unbuffered_env`) and
    ``GFORTRAN_UNBUFFERED_PRECONNECTED=y`` (`FORTRAN_UNBUFFERED`) added, each unless
    `env` or `environ` (the trainer's, which the job inherits) sets it: every backend's
    jobs (`Job.full_env`; Slurm's batch script and srun steps), so that a Python or
    gfortran solver's lines reach its log before a kill. Slurm's batch jobs lacked the
    Fortran one: a gfortran solver's log, killed as hung, was empty."""
    own = {str(k): str(v) for k, v in env.items()}
    if FORTRAN_UNBUFFERED not in own and FORTRAN_UNBUFFERED not in environ:
        own = {FORTRAN_UNBUFFERED: "y", **own}
    return unbuffered_env(own, environ)


def kill_line(job: Job, reason: str | None, how: str) -> None:
    """The launcher's line in `job`'s log before it kills it (`log_lines.launcher_line`,
    cut at its `COLUMNS`: a reason and its fix make it ~240 characters): `how` (the
    backend's signals) and `reason`; nothing for a `reason` of None."""
    if reason is not None:
        launcher_line(job.log_path, f"killing this job ({how}): {reason}")


def kill_reasons(handles: Sequence[Any], reasons: Sequence[str] | None) -> list[str | None]:
    """`reasons` (one a handle, in order; None: none told) for `kill_all`'s `handles`.

    Raises:
        ValueError: as many reasons as handles are not given.
    """
    if reasons is None:
        return [None] * len(handles)
    if len(reasons) != len(handles):
        raise ValueError(f"{len(reasons)} kill reasons for {len(handles)} jobs: one a job")
    return list(reasons)


#: the reason of the kills of a backend's `close` (the study's end), in the job logs
CLOSE_REASON = "the launcher closes its backend (the study ends): every job left is killed"


class LaunchError(RuntimeError):
    """A job could not be started (bad command, missing executable, submission refused)."""


@dataclass(frozen=True)
class Job:
    """One job to start.

    Attributes:
        name: unique within a study (e.g. ``sim-12`` or ``sim-12-r1`` for a restart);
            used for log file names and Slurm job names.
        argv: the command, already formatted (no shell): for an MPI backend, the
            command of one rank (the backend prepends ``mpiexec -n N`` / ``srun``).
        env: variables to add to the launcher's environment (the simulation id,
            parameters, rendezvous directory...).
        cwd: working directory (None: the launcher's).
        log_path: stdout and stderr of the job go to this file (created with its
            parents); None: inherited.
        ranks: MPI ranks of the job (1 for a serial simulation).
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | os.PathLike[str] | None = None
    log_path: str | os.PathLike[str] | None = None
    ranks: int = 1

    def full_env(self) -> dict[str, str]:
        """The launcher's environment with `env` on top, ``PYTHONUNBUFFERED=1`` unless
        either sets it (`unbuffered_env`), and ``GFORTRAN_UNBUFFERED_PRECONNECTED=y``
        likewise (`FORTRAN_UNBUFFERED`: a gfortran solver's lines reach the log before
        a kill). C's stdio has no such variable: a C solver sets its stdout line-buffered
        itself (docs/how-to/compiled-solver.md)."""
        return {**os.environ, **unbuffered_outputs(self.env, os.environ)}

    def say_start(self, what: str, backend: str) -> None:
        """The launcher's line in the log before it launches this job: when, the job's
        name (``sim-3-r1``, ``worker-0-r1``: the simulation's id or the worker's slot),
        `what` it is of it (``attempt 1``, ``launch 2``), the `backend`'s name and the
        ranks, ``starting sim-3-r1 (attempt 1, slurm, 1 rank):``, then, on a line of its
        own kept whole (`launcher_line`'s `whole`: copied, it pastes as it ran), the
        command (one rank's: an MPI backend prepends its own). Short, so that with the
        prefix and the time it is one line of at most 100 columns for the usual names
        (before, ``starting worker 0 (its launch 1) as job worker-0 (local backend, 1
        rank):`` took two); a longer one is cut (`log_lines.cut`)."""
        ranks = f"{self.ranks} ranks" if self.ranks != 1 else "1 rank"
        launcher_line(
            self.log_path,
            f"starting {self.name} ({what}, {backend or 'launcher'}, {ranks}):",
            whole=shlex.join(str(arg) for arg in self.argv),
        )

    def open_log(self) -> Any:
        """Open `log_path` for appending (a restart appends to the same file), or None."""
        if self.log_path is None:
            return None
        path = Path(self.log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "ab")  # noqa: SIM115 - handed to the child, closed by the backend


class Handle(ABC):
    """A started job, as a backend tracks it (opaque to the launcher)."""

    job: Job


class Backend(ABC):
    """Starts, polls and kills jobs (see the module docstring for the contract)."""

    #: short name used in configuration and logs ("local", "mpiexec", "slurm")
    name: str = ""
    #: whether a job's ranks may run under srun (``--kill-on-bad-exit``), so that srun's
    #: lines at the end of its log are srun's own account of its tasks: only then is
    #: the code of the task that failed first read from them (`exit_cause.own_exit`).
    #: False here: a solver's log that merely ends in such lines is not srun's.
    srun_tasks: bool = False
    #: whether its jobs may run on other machines than the trainer's, which a receiver
    #: bound to loopback does not serve (the study warns: `study.launch`): Slurm's
    #: batch jobs; an ``mpiexec`` told of hosts. False here: jobs on this machine.
    other_hosts: bool = False

    @abstractmethod
    def launch(self, job: Job) -> Handle:
        """Start `job`; return at once."""

    @abstractmethod
    def poll(self, handle: Handle) -> int | None:
        """None while the job runs, else its exit code."""

    @abstractmethod
    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        """End the job's whole process tree (polite, then forced after `grace` s). Its
        exit code if it had ended on its own, None if the kill ended it or the backend
        cannot tell (the module docstring says which). `reason`: why, for the launcher's
        line in its log (`kill_line`); None: no line."""

    def kill_all(
        self,
        handles: Sequence[Handle],
        grace: float = 5.0,
        reasons: Sequence[str] | None = None,
    ) -> list[int | None]:
        """`kill` each of `handles` (with its reason among `reasons`, one a handle:
        `kill_reasons`); their results, in order. A backend whose kills can
        overlap overrides this so that the graces run together (the local and mpiexec
        backends: SIGTERM to every job, then one `grace` for them all): a stop of N
        jobs that ignore SIGTERM then takes `grace` s, not N x `grace`. This default
        kills one job after another."""
        told = kill_reasons(handles, reasons)
        return [self.kill(handle, grace, why) for handle, why in zip(handles, told, strict=True)]

    @abstractmethod
    def close(self) -> None:
        """Kill every job still running; idempotent."""

    def stop_bound(self, grace: float) -> float:
        """Seconds a study's stop (`kill_all` of its jobs with `grace`, then `close`) may
        block at most, beyond the moments its commands take: how long the trainer ranks'
        last meeting waits for rank 0's study to stop (`trainer.exit_meeting`). This
        default: one `grace` (the jobs' graces run together, as this package's backends
        kill them); a backend that waits for more adds it (Slurm: `controller_wait`)."""
        return grace

    def begin_study(self, study: str) -> None:
        """Before the first `launch`: `study` (see `study_id`) is the study this backend
        runs jobs for; the jobs an earlier run of it left are ended (blocks meanwhile).
        Default: nothing (local jobs die with the trainer, see `LocalBackend`; which
        removes, as `MpiexecBackend` does, the MPICH segments they left)."""
        del study

    def started(self, handle: Handle) -> bool:
        """Whether the job runs (or ran): False while a scheduler still queues it, so
        that waiting in a queue never counts as a simulation's silence. A job started
        at once (a process) is started; so says this default."""
        return True

    def queue_reason(self, handle: Handle) -> str | None:
        """Why the scheduler keeps a job that is not `started` in its queue, in its own
        word (Slurm's ``Resources``, ``BeginTime``...), for messages; None when it did
        not say, or the job is not queued. This default: None (no queue)."""
        del handle
        return None

    def describe(self, handle: Handle) -> str:
        """A short human-readable id of the job for logs (pid, Slurm job id...)."""
        return handle.job.name

    def ran_on(self, handle: Handle) -> str | None:
        """The node a job ran on, for its failure's line, where the backend can tell
        and it may differ between jobs (a Slurm batch job: the node squeue last listed
        it on); None otherwise. This default: None (every job runs on this host)."""
        del handle
        return None
