"""A worker's launcher: where the worker finds it (the environment a launcher in worker
mode sets), whether its process still runs (`launcher_gone`), and what the worker says
when it has none, never started by one (`NotAWorker`) or left by it (`LauncherGone`).

Standard library only: `client.worker` imports it (and re-exports its names), and a
solver's command line calls `refuse_worker_by_hand` to refuse ``--worker`` run by hand
before it imports numpy or the client (pyzmq).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = [
    "ENV_LAUNCHER",
    "ENV_LAUNCHER_KEY",
    "ENV_LAUNCHER_PROCESS",
    "ENV_WORKER",
    "LauncherGone",
    "NotAWorker",
    "launcher_gone",
    "launcher_missing",
    "launcher_process",
    "parent_gone",
    "refuse_worker_by_hand",
    "worker_by_hand",
]

#: The launcher's ZeroMQ endpoint (set for workers only).
ENV_LAUNCHER = "MELISSA_TRAINER_LAUNCHER"
#: The launcher's CURVE server public key (Z85), set when it listens beyond loopback.
ENV_LAUNCHER_KEY = "MELISSA_TRAINER_LAUNCHER_KEY"
#: The worker's name (its job name), for the launcher's bookkeeping and logs.
ENV_WORKER = "MELISSA_TRAINER_WORKER"
#: The launcher's process, ``PID START BOOT PIDNS`` (`launcher_process`), that a worker
#: checks is still running (`launcher_gone`); unset where ``/proc`` does not say.
ENV_LAUNCHER_PROCESS = "MELISSA_TRAINER_LAUNCHER_PROCESS"


class NotAWorker(RuntimeError):
    """This process was not started by a launcher in worker mode: `ENV_LAUNCHER` or
    `ENV_WORKER` is not set (nor given to `worker.WorkerClient`), so it has no launcher
    to ask for simulations. Raised by the first request (`worker.next_simulation`,
    `worker.serve_simulations`), before any simulation runs; its message says what is
    missing and how a worker is started (`launcher_missing`)."""


class LauncherGone(RuntimeError):
    """A worker's launcher is gone: its process ended (`launcher_gone`) when the worker
    would ask it for a simulation (`worker.WorkerClient.next_simulation`: the first
    request too, a worker orphaned before it started), or (that, or the worker's parent
    ended: `parent_gone`) when one of its simulations was not delivered
    (`worker.serve_simulations`). The worker ends there, its last simulation not reported
    (no one would take the report; waiting for an answer would only delay the worker's
    end by its request's timeout). A run resumed from the trainer's checkpoint runs it
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


def worker_by_hand(study: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The refusal of a solver's ``--worker`` in a process whose `environ` (default: its
    own) no launcher in worker mode made (`launcher_missing`), `study` the command that
    starts its workers: "--worker: not started by ... (this solver's study: STUDY)";
    None in a worker."""
    missing = launcher_missing(environ)
    return None if missing is None else f"--worker: {missing} (this solver's study: {study})"


def refuse_worker_by_hand(study: str, argv: Sequence[str] | None = None) -> None:
    """Exit with status 2 (a usage error), `worker_by_hand`'s line on stderr after the
    program's name, when `argv` (default: ``sys.argv[1:]``) asks for ``--worker`` (before
    any ``--``; not with ``-h`` or ``--help``, which the solver answers) in a process no
    launcher started; return otherwise. Standard library only: a solver's script calls
    it first, under ``if __name__ == "__main__"``, so that ``--worker`` run by hand is
    refused before numpy and the client are imported (docs/how-to/own-solver.md, worker
    mode); its own parse then checks ``--worker`` again with `worker_by_hand` (an
    abbreviation, a ``main(argv)`` called from Python)."""
    args = list(sys.argv[1:] if argv is None else argv)
    args = args[: args.index("--")] if "--" in args else args
    if "--worker" not in args or {"-h", "--help"} & set(args):
        return
    refused = worker_by_hand(study)
    if refused is not None:
        print(f"{os.path.basename(sys.argv[0]) or 'solver'}: {refused}", file=sys.stderr)
        raise SystemExit(2)


def parent_gone(parent: int, simulation_id: int) -> str | None:
    """What a worker whose parent process was `parent` when it started (`os.getppid`)
    says when that parent has ended, as a sentence that follows the not-delivered
    error of `simulation_id`; None while the parent is the same.

    The parent is the launcher's process (the local backend runs a job in place of its
    parent-death wrapper), or what the launcher started the worker through (a shell
    script that forks its solver, ``mpiexec``). A parent ended is the launcher gone
    (a trainer killed where no parent-death signal reached the worker: a wrapper that
    forked it, a system without one) or its job ended under it: either way no launcher
    counts on this worker any more. A worker whose parent outlives the launcher cannot
    tell from it: `launcher_gone` can, on the launcher's machine; elsewhere (a Slurm job
    on another node) its next request times out."""
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


def launcher_process(pid: int | None = None) -> str | None:
    """The value of `ENV_LAUNCHER_PROCESS` that names process `pid` (default: this one,
    the launcher's) to the workers it starts: ``PID START BOOT PIDNS``, its pid, its
    start time (``/proc/PID/stat`` field 22, clock ticks after boot: a pid reused by
    another process has another), this machine's boot id and its pid namespace, which
    tell a worker on another node, or in another pid namespace, that the pid names
    nothing there (`launcher_gone` cannot tell then). None where ``/proc`` does not say
    (not Linux): the variable is not set, and workers check only their parent
    (`parent_gone`)."""
    pid = os.getpid() if pid is None else pid
    start, here = _running_since(pid), _here()
    if start is None or here is None:
        return None
    return f"{pid} {start} {here}"


def launcher_gone(
    simulation_id: int | None, environ: Mapping[str, str] | None = None
) -> str | None:
    """What a worker says when the launcher's process named in `environ`'s (default: its
    own) `ENV_LAUNCHER_PROCESS` has ended (`launcher_process`: not running, a zombie, or
    its pid another process's now), one or two sentences: the worker ends, no launcher
    takes its report of `simulation_id` (None: it asked for none yet), and what runs that
    simulation again. None while that process runs, and when it cannot tell: the variable
    unset or not one, another machine or pid namespace than the launcher's.

    A worker checks it when it starts and before each request (`worker.WorkerClient`),
    where it would otherwise wait its request's timeout for an answer that never comes,
    and when a simulation was not delivered (`worker.serve_simulations`). Unlike
    `parent_gone` it sees a worker orphaned before it started (its launcher gone while
    it was queued or loading, a shell wrapper's parent ended), whose parent at start is
    init or a subreaper already, and a launcher gone under a wrapper that lives on."""
    env = os.environ if environ is None else environ
    fields = env.get(ENV_LAUNCHER_PROCESS, "").split()
    if len(fields) != 4 or not fields[0].isdigit():
        return None  # (unset, or not one: cannot tell)
    if _here() != " ".join(fields[2:]):
        return None  # (another machine or pid namespace: its pid names nothing here)
    pid, start = int(fields[0]), fields[1]
    if _running_since(pid) == start:
        return None
    ended = f"The launcher of this worker (pid {pid}, {ENV_LAUNCHER_PROCESS}) has ended"
    resume = "If the study is to go on, resume it (--resume_from_checkpoint latest)"
    if simulation_id is None:
        return (
            f"{ended} before the worker asked it for a simulation: nothing was run, and no "
            f"launcher counts on this worker, so it ends. {resume}: the resumed launcher "
            f"starts its workers again."
        )
    return (
        f"{ended}: no launcher takes this worker's report, so the worker ends, simulation "
        f"{simulation_id} not reported. {resume}: the resumed run runs simulation "
        f"{simulation_id} again unless the trainer's checkpoint holds all its data."
    )


def _running_since(pid: int) -> str | None:
    """The start time of process `pid` (``/proc/PID/stat`` field 22), None when it is
    not running: no such process, or a zombie (ended, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[-1].split()  # (a name may hold ") ")
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _here() -> str | None:
    """``BOOT PIDNS``: this machine's boot id and this process's pid namespace, None
    without ``/proc``."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None
