"""Jobs as local processes: the default backend, needs nothing.

Each job is a `subprocess.Popen` of its argv (no shell) in a new session, so that it and
every process it starts share one process group, and `kill` signals the whole group:
SIGTERM, then SIGKILL after the grace period. When a job's main process ends, what it
left running in its group is killed too (an ended job leaves nothing behind).

On Linux, the child also asks for ``PR_SET_PDEATHSIG = SIGTERM`` before `exec`, so that
it is terminated if the launcher dies without a chance to clean up (SIGKILL, OOM kill).
The kernel sends that signal when the *thread* that started the child ends: the launcher
starts jobs from its supervisor thread, which outlives its jobs. Only the direct child
gets it; a simulation that starts its own processes should end them on SIGTERM (Python's
default SIGTERM action and ``mpiexec`` do).

Used from one thread (see `Backend`).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO

from melissa_trainer.launcher.backends.base import Backend, Handle, Job, LaunchError

__all__ = ["LocalBackend", "LocalHandle"]

logger = logging.getLogger("melissa_trainer.launcher")

_PR_SET_PDEATHSIG = 1


def _pdeathsig_setter() -> Callable[[int], None] | None:
    """``f(parent_pid)`` to run in the child before exec: sets PR_SET_PDEATHSIG; None off
    Linux.

    libc's `prctl` is looked up here, in the parent: between fork and exec the child
    only makes the call (no library loading, which is unsafe after a fork in a
    threaded process).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int
    sigterm = int(signal.SIGTERM)
    getppid, kill, getpid = os.getppid, os.kill, os.getpid

    def set_pdeathsig(parent: int) -> None:
        prctl(_PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if getppid() != parent:  # the parent died before the call: nobody will signal us
            kill(getpid(), sigterm)

    return set_pdeathsig


class LocalHandle(Handle):
    """A job started by `LocalBackend`: its process and its log file."""

    def __init__(self, job: Job, process: subprocess.Popen[bytes], log: IO[bytes] | None) -> None:
        self.job = job
        self.process = process
        self.log = log
        self.ended = False  # the main process was reaped and its group cleaned up

    @property
    def pid(self) -> int:
        """The job's main process, also its process group and session id."""
        return self.process.pid


class LocalBackend(Backend):
    """Jobs as local processes in their own process groups (see the module docstring)."""

    name = "local"

    def __init__(self) -> None:
        self._handles: list[LocalHandle] = []
        self._pdeathsig = _pdeathsig_setter()

    def launch(self, job: Job) -> LocalHandle:
        if job.ranks != 1:
            raise LaunchError(
                f"job {job.name}: the local backend runs 1 rank, not {job.ranks}; use the "
                f"'mpiexec' or 'slurm' backend for MPI simulations"
            )
        log = job.open_log()
        setter = self._pdeathsig
        try:
            process = subprocess.Popen(
                list(job.argv),
                env=job.full_env(),
                cwd=job.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT if log is not None else None,
                start_new_session=True,
                preexec_fn=None if setter is None else functools.partial(setter, os.getpid()),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            if log is not None:
                log.close()
            raise LaunchError(f"cannot start job {job.name} ({list(job.argv)}): {exc}") from exc
        handle = LocalHandle(job, process, log)
        self._handles.append(handle)
        return handle

    def poll(self, handle: Handle) -> int | None:
        handle = self._mine(handle)
        if handle.ended:
            return handle.process.returncode
        code = handle.process.poll()
        if code is not None:
            self._finish(handle)
        return code

    def kill(self, handle: Handle, grace: float = 5.0) -> None:
        handle = self._mine(handle)
        if handle.ended:  # its group id may belong to someone else by now
            return
        if handle.process.poll() is None:
            _signal_group(handle.pid, signal.SIGTERM)
            try:
                handle.process.wait(timeout=max(grace, 0.0))
            except subprocess.TimeoutExpired:
                _signal_group(handle.pid, signal.SIGKILL)
                handle.process.wait()
        self._finish(handle)

    def close(self) -> None:
        for handle in list(self._handles):
            self.kill(handle)

    def describe(self, handle: Handle) -> str:
        return f"{handle.job.name} (pid {self._mine(handle).pid})"

    def _finish(self, handle: LocalHandle) -> None:
        """The main process has ended: end its group's leftovers, close the log."""
        if handle.ended:
            return
        handle.ended = True
        # The group outlives its leader only through processes the job left behind; they
        # belong to an ended job, so they are orphans by definition. (Done right after
        # the leader is reaped: its id cannot have been reused for another group yet.)
        if _signal_group(handle.pid, signal.SIGKILL):
            _wait_group_gone(handle.pid, timeout=1.0)
        if handle.log is not None:
            handle.log.close()
            handle.log = None
        if handle in self._handles:
            self._handles.remove(handle)

    @staticmethod
    def _mine(handle: Handle) -> LocalHandle:
        if not isinstance(handle, LocalHandle):
            raise TypeError(f"not a LocalBackend handle: {handle!r}")
        return handle

    def __repr__(self) -> str:
        return f"LocalBackend({len(self._handles)} running)"


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False if it no longer exists (which is fine)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the id was reused by someone else's group
        return False
    return True


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Wait (Linux; bounded) until no live process is left in group `pgid`, so that a
    killed job is really gone when `kill` returns. SIGKILL is not instantaneous: a
    process may still be exiting when the signal call returns. Zombies count as gone."""
    if not sys.platform.startswith("linux"):
        return
    deadline = time.monotonic() + timeout
    while _group_members(pgid):
        if time.monotonic() >= deadline:
            logger.warning("processes %s of a killed job are still alive", _group_members(pgid))
            return
        time.sleep(0.005)


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members
