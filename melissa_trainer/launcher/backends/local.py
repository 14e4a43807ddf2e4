"""Jobs as local processes: the default backend, needs nothing.

Each job is a `subprocess.Popen` of its argv (no shell) in a process group of its own,
so that `kill` signals it and every process it starts: SIGTERM, then SIGKILL after the
grace period. When a job's main process ends, what it left running in its group is
killed too: an ended job leaves nothing behind, not even the shared memory of an MPI
singleton killed before ``MPI_Finalize`` (`mpich_segments`).

**Beside the trainer.** A `Placement` (the default one unless told otherwise) starts
jobs at a lower priority than the trainer (``nice -n 10`` in front of the command), in
the trainer's session (so that the priority counts on kernels with autogroup
scheduling), with one BLAS/OpenMP thread each unless their environment says otherwise,
and optionally on given cores: see `placement` for what each does and why.
``placement=None`` starts each job in a new session of its own with nothing changed
(the behaviour before placements; also what a Python older than 3.11 gets for the
session, as its `subprocess` cannot make a process group without ``preexec_fn``).

**No fork of the trainer.** The `Popen` has no ``preexec_fn`` (nor user or group
change), so CPython starts the child with ``vfork``: the child borrows the trainer's
memory until it execs (the launching thread waits until then), and nothing is
copied. A ``preexec_fn`` (Python code run in the child before its exec) makes CPython
``fork`` the whole trainer instead: the page tables of its hundreds of MB are copied
and write-protected, and each page the trainer writes afterwards takes a copy-on-write
fault. ``benchmarks/launch_cost.py`` measures both (docs/measured.md, "Launching
simulations"): launching costs the trainer's steps nothing measurable, where the fork
cost a third of them.

**Dying with the trainer.** On Linux a job gets ``PR_SET_PDEATHSIG = SIGTERM``, so that
it is terminated if the launcher dies without a chance to clean up (SIGKILL, OOM kill).
The kernel sends that signal when the *thread* that started the child ends: the
launcher starts jobs from its supervisor thread, which outlives its jobs. Only the
direct child gets it; a simulation that starts its own processes should end them on
SIGTERM (Python's default SIGTERM action and ``mpiexec`` do). The signal is asked for
by a small program put in front of the job's argv, which sets it and then execs the
command in place: same pid, so the handle's pid is still the job's main process and
process group leader, and its exit status (or killing signal) is the command's.

* ``setpriv --pdeathsig TERM -- ARGV`` (util-linux; tried once per process, since a
  setpriv older than util-linux 2.33 lacks the option): setpriv's own start, spent in
  the job's start, not in the trainer (docs/measured.md, "Launching simulations").
* Without a usable setpriv: ``python -I -S -c WRAPPER ARGV``, the same in Python, an
  interpreter's start more per launch (the debug log says which of the two is used).
* Off Linux: the command as it is (no parent-death signal there).

What a wrapper changes: its ``prctl`` comes after `launch` has returned (once setpriv
has started), where ``preexec_fn`` ran it before. If the launching thread ends
in between, the job is the child of another thread of the trainer when it asks, and
is signalled when the trainer process dies rather than when that thread ends. If the
whole trainer dies in between, nobody will signal the job: the Python wrapper then
checks its parent and terminates itself, as ``preexec_fn`` did; setpriv has no such
check, so a trainer SIGKILLed within that millisecond after a launch (longer on a
loaded machine) leaves that one job running
(tests/launcher/backends/test_launch_window.py). Since the program exec'd first is the
wrapper, the backend looks the command up itself (in the job's PATH, from the job's
working directory) as an exec would, so that a missing or non-executable command is
still a `LaunchError` at launch; the wrappers' ``execvp``
(glibc) runs a file without a ``#!`` line through ``/bin/sh`` where a direct exec
fails with ENOEXEC.

Used from one thread (see `Backend`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from melissa_trainer.launcher.backends.base import (
    CLOSE_REASON,
    Backend,
    Handle,
    Job,
    LaunchError,
    kill_line,
    kill_reasons,
)
from melissa_trainer.launcher.backends.mpich_record import SegmentRecord
from melissa_trainer.launcher.backends.mpich_segments import SegmentWatch, listing
from melissa_trainer.launcher.backends.pdeathsig import (
    check_executable,
    pdeathsig_wrapper,
    wrapped_argv,
)
from melissa_trainer.launcher.backends.placement import Placement
from melissa_trainer.launcher.backends.placement import nice_program as _nice_program
from melissa_trainer.launcher.backends.placement import renice_group as _renice_group
from melissa_trainer.launcher.backends.process_group import (
    group_members,
    signal_group,
    wait_group_gone,
)

__all__ = ["DEFAULT_PLACEMENT", "LocalBackend", "LocalHandle"]

#: what `LocalBackend` uses unless told otherwise
DEFAULT_PLACEMENT = Placement()
#: `subprocess.Popen(process_group=...)` (Python 3.11): a group of its own without a
#: ``preexec_fn`` (which would fork the trainer) nor a new session
_HAVE_PROCESS_GROUP = sys.version_info >= (3, 11)

logger = logging.getLogger("melissa_trainer.launcher")

#: `LocalBackend._wrapper` before its first launch looks for one
_UNRESOLVED = object()


class LocalHandle(Handle):
    """A job started by `LocalBackend`: its process and its log file."""

    def __init__(
        self,
        job: Job,
        process: subprocess.Popen[bytes],
        log: IO[bytes] | None,
        shm: SegmentWatch | None = None,
    ) -> None:
        self.job = job
        self.process = process
        self.log = log
        self.ended = False  # the main process was reaped and its group cleaned up
        self.signalled = False  # `kill` signalled its group while its main process ran
        self.shm = shm or SegmentWatch()  # an MPI singleton's segment (`mpich_segments`)

    @property
    def pid(self) -> int:
        """The job's main process, also its process group and session id."""
        return self.process.pid


class LocalBackend(Backend):
    """Jobs as local processes in their own process groups (see the module docstring).

    Args:
        placement: priority, threads and cores of the jobs (`Placement`); default
            `DEFAULT_PLACEMENT` (niceness +10, one BLAS/OpenMP thread, any core, the
            trainer's session); None: a new session per job and nothing changed.
    """

    name = "local"

    def __init__(self, placement: Placement | None = DEFAULT_PLACEMENT) -> None:
        if placement is not None and not isinstance(placement, Placement):
            raise ValueError(
                f"placement must be a melissa_trainer.launcher.Placement, or None for a new "
                f"session per job and nothing changed, not {placement!r}"
            )
        self.placement = placement
        self._handles: list[LocalHandle] = []
        self._record = SegmentRecord()  # MPI singletons' segments, for a run after a SIGKILL
        self._nice = _nice_program() if placement is not None and placement.nice else None
        #: the parent-death wrapper (`pdeathsig_wrapper`), looked for at the first launch:
        #: looking starts a process (``setpriv --version``), which a backend that never
        #: launches (a study resumed complete, a test of the launcher's bookkeeping)
        #: should not
        self._wrapper: str | None | object = _UNRESOLVED

    def _resolve_wrapper(self) -> str | None:
        if self._wrapper is _UNRESOLVED:
            self._wrapper = wrapper = pdeathsig_wrapper()
            if wrapper is None:
                logger.debug("local jobs start with no parent-death signal (Linux only)")
            elif wrapper == "python":
                logger.debug(
                    "local jobs start with vfork, PR_SET_PDEATHSIG set by the Python wrapper "
                    "(no setpriv with --pdeathsig found: about 20 ms more per launch)"
                )
            else:
                logger.debug(
                    "local jobs start with vfork, PR_SET_PDEATHSIG set by %s --pdeathsig TERM",
                    wrapper,
                )
        return self._wrapper  # type: ignore[return-value]

    def launch(self, job: Job) -> LocalHandle:
        if job.ranks != 1:
            raise LaunchError(
                f"job {job.name}: the local backend runs 1 rank, not {job.ranks}; use the "
                f"'mpiexec' or 'slurm' backend for MPI simulations"
            )
        if not job.argv:
            raise LaunchError(f"job {job.name}: empty command")
        placement = self.placement
        env = job.full_env() if placement is None else placement.env(job.full_env())
        argv = list(job.argv)
        if self._nice is not None:  # exec'd in place: the job's pid, argv and status
            argv = [self._nice, "-n", str(placement.nice), *argv]  # type: ignore[union-attr]
        group = placement is not None and _HAVE_PROCESS_GROUP
        # a group of its own in our session, or (without a placement, or a Python without
        # `process_group`) a session of its own
        session: dict[str, Any] = {"process_group": 0} if group else {"start_new_session": True}
        wrapper = self._resolve_wrapper()
        before = listing()  # (MPICH's files: what a singleton crashing at once left is new)
        log = job.open_log()
        try:
            if wrapper is not None or self._nice is not None:  # else Popen's exec
                check_executable(job.argv[0], env, job.cwd)
            with contextlib.nullcontext() if placement is None else placement.affinity():
                process = subprocess.Popen(
                    wrapped_argv(argv, env, wrapper),
                    env=env,
                    cwd=job.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT if log is not None else None,
                    **session,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            if log is not None:
                log.close()
            fix = ""
            if isinstance(exc, FileNotFoundError) and exc.filename == os.fsdecode(job.argv[0]):
                fix = (  # (a typo, or "python" where PATH has none: said with the fix)
                    f"; no executable file {exc.filename!r} (a bare name is looked up on the "
                    "job's PATH, a path from its working directory): give its full path, or "
                    "sys.executable for a Python solver run by the trainer's interpreter"
                )
            said = f"could not start job {job.name} ({list(job.argv)}): {exc}{fix}"
            raise LaunchError(said) from exc
        if placement is not None and placement.nice and self._nice is None:
            _renice_group(process.pid, placement.nice)
        handle = LocalHandle(
            job, process, log, SegmentWatch.singleton(process.pid, before, self._record)
        )
        self._handles.append(handle)
        return handle

    def begin_study(self, study: str) -> None:
        self._record.begin(study)  # what singletons of a SIGKILLed run left

    def poll(self, handle: Handle) -> int | None:
        handle = self._mine(handle)
        if handle.ended:
            return handle.process.returncode
        code = handle.process.poll()
        if code is not None:
            self._finish(handle)
        elif handle.shm.due():  # one file read: the main process's maps
            handle.shm.look([handle.pid])
        return code

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        """SIGTERM to the job's process group, SIGKILL after `grace` s. Its exit code
        if it had ended on its own (`Backend`'s contract): the reap just before the
        signal (``Popen.poll``) sees an end since the caller's last poll exactly; any
        end after the signal counts as the kill's, status 0 included: a solver that
        catches SIGTERM and exits 0 (having written a restart file, say) did not finish
        its simulation, and a study without data reports would take it for finished
        and never run it again. What remains: a job that ends on its own in the
        microseconds between that reap and the signal counts as killed (run again).
        `reason`: the launcher's line in the log of a job still running (`kill_line`)."""
        return self.kill_all([handle], grace, None if reason is None else [reason])[0]

    def kill_all(
        self,
        handles: Sequence[Handle],
        grace: float = 5.0,
        reasons: Sequence[str] | None = None,
    ) -> list[int | None]:
        """`kill` of each of `handles`, their graces together: SIGTERM to every live
        job's group first, then one wait of `grace` s for them all, then SIGKILL to the
        groups still running. Blocks up to `grace` s (and the SIGKILLed jobs' ends), not
        `grace` per job (64 solvers each writing a restart file on SIGTERM took 64
        graces one after another). Each job is finished right after its reap, before any
        other wait: its group id is surely its own only until then. Results in order."""
        mine = [self._mine(handle) for handle in handles]
        how = f"SIGTERM to its process group, SIGKILL after {grace:g} s"
        for handle, why in zip(mine, kill_reasons(mine, reasons), strict=True):
            if handle.ended:
                continue
            if handle.process.poll() is None:
                kill_line(handle.job, why, how)  # (before the signal: first in the log)
                handle.shm.add(group_members(handle.pid))  # (alive: what they map)
                handle.signalled = True
                signal_group(handle.pid, signal.SIGTERM)
            else:
                self._finish(handle)
        deadline = time.monotonic() + max(grace, 0.0)
        for handle in mine:
            if not handle.ended:
                try:
                    handle.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    signal_group(handle.pid, signal.SIGKILL)  # (unreaped: still its group)
                else:
                    self._finish(handle)
        for handle in mine:
            if not handle.ended:
                handle.process.wait()
                self._finish(handle)
        return [self._own_code(handle) for handle in mine]

    @staticmethod
    def _own_code(handle: LocalHandle) -> int | None:
        """The exit code of an ended job if it ended on its own (`kill`), else None."""
        return None if handle.signalled else handle.process.returncode

    def close(self) -> None:
        self.kill_all(list(self._handles), reasons=[CLOSE_REASON] * len(self._handles))

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
        if signal_group(handle.pid, signal.SIGKILL):
            wait_group_gone(handle.pid, timeout=1.0)
        handle.shm.remove(handle.job.name)  # what ranks killed before MPI_Finalize left
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
        return f"LocalBackend({len(self._handles)} running, placement={self.placement})"
