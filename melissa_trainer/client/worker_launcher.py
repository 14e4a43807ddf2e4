"""A worker's launcher: where the worker finds it (the environment a launcher in worker
mode sets) and what the worker says when it has none, never started by one
(`NotAWorker`) or left by it (`LauncherGone`).

Standard library only: `client.worker` imports it (and re-exports its names), and a
solver's command line may call `launcher_missing` to refuse ``--worker`` run by hand
before it imports the client (pyzmq).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "ENV_LAUNCHER",
    "ENV_LAUNCHER_KEY",
    "ENV_WORKER",
    "LauncherGone",
    "NotAWorker",
    "launcher_missing",
    "parent_gone",
]

#: The launcher's ZeroMQ endpoint (set for workers only).
ENV_LAUNCHER = "MELISSA_TRAINER_LAUNCHER"
#: The launcher's CURVE server public key (Z85), set when it listens beyond loopback.
ENV_LAUNCHER_KEY = "MELISSA_TRAINER_LAUNCHER_KEY"
#: The worker's name (its job name), for the launcher's bookkeeping and logs.
ENV_WORKER = "MELISSA_TRAINER_WORKER"


class NotAWorker(RuntimeError):
    """This process was not started by a launcher in worker mode: `ENV_LAUNCHER` or
    `ENV_WORKER` is not set (nor given to `worker.WorkerClient`), so it has no launcher
    to ask for simulations. Raised by the first request (`worker.next_simulation`,
    `worker.serve_simulations`), before any simulation runs; its message says what is
    missing and how a worker is started (`launcher_missing`)."""


class LauncherGone(RuntimeError):
    """A worker's launcher is gone (`parent_gone`) when one of its simulations was not
    delivered: `worker.serve_simulations` ends there, that simulation not reported (no
    one would take the report; waiting for an answer would only delay the worker's end
    by its request's timeout). A run resumed from the trainer's checkpoint runs it
    again. Its message is the one line to print."""


def launcher_missing(environ: Mapping[str, str] | None = None) -> str | None:
    """Why a process whose `environ` (default: its own) lacks `ENV_LAUNCHER` or
    `ENV_WORKER` (or holds it empty) is no worker, and how a worker is started: the
    message of `NotAWorker`; None when both are set."""
    env = os.environ if environ is None else environ
    missing = [name for name in (ENV_LAUNCHER, ENV_WORKER) if not env.get(name, "").strip()]
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"not started by a launcher in worker mode: {' and '.join(missing)} {verb} not "
        f"set, which Launcher(..., worker=True) sets in each worker it starts (the worker "
        f"asks it for its simulations); run the study that starts the workers, not a "
        f"worker by hand"
    )


def parent_gone(parent: int, simulation_id: int) -> str | None:
    """What a worker whose parent process was `parent` when it started (`os.getppid`)
    says when that parent has ended, as a sentence that follows the not-delivered
    error of `simulation_id`; None while the parent is the same.

    The parent is the launcher's process (the local backend runs a job in place of its
    parent-death wrapper), or what the launcher started the worker through (a shell
    script that forks its solver, ``mpiexec``). A parent ended is the launcher gone
    (a trainer killed where no parent-death signal reached the worker: a wrapper that
    forked it, a system without one) or its job ended under it: either way no launcher
    counts on this worker any more. A worker whose parent outlives the launcher (a
    Slurm job on another node) cannot tell from it: its next request times out."""
    now = os.getppid()
    if now == parent:
        return None
    return (
        f"The process that started this worker (pid {parent}) ended (its parent is now "
        f"pid {now}): its launcher is gone, or ended the job that ran the worker (a "
        f"failed attempt, which it runs again itself); either way no launcher takes this "
        f"worker's report, so the worker ends, simulation {simulation_id} not reported. "
        f"If the trainer is gone, resume it from its checkpoint (--resume_from_checkpoint "
        f"latest): the resumed run runs simulation {simulation_id} again."
    )
