"""MPI jobs on this machine (or the hosts ``mpiexec`` is told about): each job is
``mpiexec -n RANKS [extra_args] ARGV``.

The ``mpiexec`` process is run by a `LocalBackend` (composition: the process handling
is the local backend's, unchanged): it runs in a new session, `kill` sends SIGTERM to
its process group, then SIGKILL after the grace period, and on Linux mpiexec gets
PR_SET_PDEATHSIG=SIGTERM. MPI launchers forward SIGTERM to the ranks and end them
when they exit. They also put their proxies and ranks in sessions of their own
(hydra does), out of reach of a process-group signal, so `kill` additionally
SIGKILLs whatever was still below mpiexec in the process tree when the kill began
(read from /proc on Linux): a rank that ignores SIGTERM, under an mpiexec that had to
be SIGKILLed, does not survive.

A job that ends before its ranks' ``MPI_Finalize`` (killed, or a rank crashed) leaves
MPICH's shared-memory file in /dev/shm, node memory that nobody frees
(`mpich_segments`). So the backend reads which files the ranks mapped, when it kills
them and, for a job that ends by itself, a few times in the job's first minute
(`mpich_segments.LOOKS_AT`: a scan of /proc each), and removes those files once the job
has ended; a job that ended before any was seen (a rank failing right after
``MPI_Init``) is swept instead (`mpich_segments.orphans`), and what the sweep found
still held is looked at again at later polls and at `close` (each job's environment
carries `JOB_MARK`, unique to it: at the last look, a file held only by processes that
carry it, left behind by the ended job, is removed too). Each launch is recorded
before the job starts (`mpich_record`), for the next run of the study after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.backends.base import CLOSE_REASON, Backend, Handle, Job, LaunchError
from melissa_trainer.launcher.backends.hydra_step import hydra_other_hosts, hydra_step_env
from melissa_trainer.launcher.backends.local import DEFAULT_PLACEMENT, LocalBackend, LocalHandle
from melissa_trainer.launcher.backends.mpich_record import SegmentRecord
from melissa_trainer.launcher.backends.mpich_segments import Listing, SegmentWatch, listing
from melissa_trainer.launcher.backends.placement import Placement

__all__ = ["JOB_MARK", "MpiexecBackend", "MpiexecHandle", "mpiexec_command", "process_tree"]

logger = logging.getLogger("melissa_trainer.launcher")

#: the variable, set to a value unique to the job, in the environment of each job's
#: mpiexec (hydra passes it on to the ranks, and they to their children): what tells a
#: process the job left behind from another job's (`SegmentWatch.retry`). Not of the
#: client's prefix: a client warns about a ``MELISSA_TRAINER_*`` it does not read
JOB_MARK = "MT_MPIEXEC_JOB"
#: seconds `close` waits for the holders of files that ended jobs' sweeps found held
CLOSE_WAIT = 2.0
#: seconds a /proc scan serves further looks (the polls of one supervisor tick): a scan
#: reads the stat file of every process on the machine
TABLE_REUSE = 0.1


def mpiexec_command(
    mpiexec: str, ranks: int, argv: Sequence[str], extra_args: Sequence[str] = ()
) -> list[str]:
    """``[mpiexec, "-n", ranks, *extra_args, *argv]``; ValueError for ranks < 1 or an
    empty command."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    if not argv:
        raise ValueError("empty command")
    return [mpiexec, "-n", str(ranks), *extra_args, *argv]


@dataclass(eq=False)
class MpiexecHandle(Handle):
    """A job started by `MpiexecBackend`: the job as given, and the local handle of its
    mpiexec process."""

    job: Job
    process: LocalHandle
    #: MPICH's segments its ranks mapped (`mpich_segments`), removed when it ends
    shm: SegmentWatch = field(default_factory=SegmentWatch)


class MpiexecBackend(Backend):
    """Jobs as ``mpiexec -n RANKS`` processes (see the module docstring).

    Args:
        mpiexec: the launcher program: a name looked up on PATH when the backend is
            made (the ``mpich`` wheel installs hydra's ``mpiexec`` next to Python), or
            a path.
        extra_args: options inserted after ``-n RANKS``, e.g. ``["-bind-to", "none"]``
            or ``["-hosts", "node1,node2"]``. A trainer inside a Slurm job step on one
            node gives its jobs ``HYDRA_LAUNCHER=fork`` unless these or the environment
            choose a launcher or hosts (`hydra_step`: a nested srun would wait forever).
        placement: the local backend's (`Placement`), for the mpiexec process and so
            for the ranks it starts on this machine: their priority, BLAS/OpenMP
            threads (mpiexec passes the environment on to every rank) and cores. Hydra
            starts its ranks in sessions of their own, where on an autogroup kernel
            the niceness no longer counts against the trainer: ``cpus`` still does
            (an MPI binding option such as ``-bind-to`` replaces it). None: nothing
            changed.

    Raises LaunchError at construction if `mpiexec` cannot be found (the message names
    the fix). Used from one thread (Backend contract).
    """

    name = "mpiexec"

    def __init__(
        self,
        mpiexec: str = "mpiexec",
        extra_args: Sequence[str] = (),
        placement: Placement | None = DEFAULT_PLACEMENT,
    ) -> None:
        if isinstance(extra_args, str | bytes):
            raise TypeError(
                f"extra_args must be a sequence of arguments, e.g. ['-bind-to', 'none'], "
                f"not {extra_args!r}"
            )
        self.extra_args = tuple(str(arg) for arg in extra_args)
        found = shutil.which(mpiexec) or _next_to_python(mpiexec)
        if found is None:
            raise LaunchError(
                f"mpiexec={mpiexec!r} was not found on PATH: install an MPI "
                "(`pip install mpich` puts mpiexec next to python), or pass the full path "
                "as MpiexecBackend(mpiexec=...)"
            )
        self.mpiexec = found
        # a trainer inside a Slurm job step: hydra's nested srun would wait forever
        self._env, line, warn = hydra_step_env(os.environ, self.extra_args)
        self.other_hosts = hydra_other_hosts(os.environ, self.extra_args)
        if line is not None:
            logger.log(logging.WARNING if warn else logging.INFO, "%s", line)
        self._local = LocalBackend(placement)
        self._running: list[MpiexecHandle] = []
        self._ending: list[MpiexecHandle] = []  # ended; files of theirs still held
        self._record = SegmentRecord()  # the segments seen, for a run after a SIGKILL
        #: the last /proc scan of a look for segments (`poll`), when, and MPICH's files
        #: listed just before it: the jobs that look in one supervisor tick share it
        self._table: tuple[float, Listing, ProcessTable] | None = None

    def launch(self, job: Job) -> Handle:
        """Start ``mpiexec -n job.ranks ...``; returns at once (LaunchError if it cannot
        be started)."""
        try:
            argv = mpiexec_command(self.mpiexec, job.ranks, job.argv, self.extra_args)
        except ValueError as exc:
            raise LaunchError(f"job {job.name}: {exc}") from exc
        # The local backend sees one process (mpiexec), which starts the ranks itself.
        token = uuid.uuid4().hex  # (the job's mark: `JOB_MARK`)
        env = {**self._env, **job.env, JOB_MARK: token}
        before = listing()  # MPICH's files: those of ranks failing at once will be new
        # recorded before the start: a trainer SIGKILLed before the job's first look
        # leaves files that the next run of the study finds by this launch's time
        launch = self._record.launching()
        try:
            process = self._local.launch(dataclasses.replace(job, argv=argv, ranks=1, env=env))
        except BaseException:
            self._record.update(done=launch)
            raise
        process.shm = SegmentWatch.off()  # (mpiexec maps nothing; the ranks' are below)
        watch = SegmentWatch(before, None, self._record, launch, f"{JOB_MARK}={token}")
        handle = MpiexecHandle(job=job, process=process, shm=watch)
        self._running.append(handle)
        return handle

    def begin_study(self, study: str) -> None:
        """Remove the MPICH segments that the jobs of an earlier run of `study`, killed
        with its trainer (SIGKILL), left on this node (`SegmentRecord`: those seen, and
        for jobs killed before their first look, the orphans made since their launch)."""
        self._record.begin(study)

    def poll(self, handle: Handle) -> int | None:
        """None while mpiexec runs, else its exit code (hydra: the largest of the ranks').
        A job that has ended leaves no MPICH segment its ranks were seen to map."""
        handle = self._own(handle)
        self._retry()
        code = self._local.poll(handle.process)
        if code is None:
            if handle.shm.due():  # the jobs looking in one tick share one /proc scan
                now = time.monotonic()
                table = self._table
                if table is None or now - table[0] > TABLE_REUSE or table[0] < handle.shm.launched:
                    # listed first: a file listed then whose ranks the scan misses would
                    # be taken for another job's (`SegmentWatch.look`)
                    table = self._table = (now, listing(), process_table())
                below = process_tree(handle.process.pid, table[2])
                handle.shm.look((pid for pid, _ in below), listed=table[1])
        elif handle in self._running:
            self._running.remove(handle)
            self._end(handle)
        return code

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        """SIGTERM to mpiexec's process group, SIGKILL after `grace`; then SIGKILL to
        what was below mpiexec when the kill began (ranks in sessions of their own); then
        unlink the MPICH segments those ranks had mapped (`mpich_segments`). mpiexec's
        exit code if it had ended on its own, as `LocalBackend.kill` tells it (its
        reap just before the signal; any end after it is the kill's, exit 0 included:
        mpiexec forwards SIGTERM, and ranks that catch it and exit 0 did not finish).
        `reason`: the launcher's line in its log, before hydra's (`LocalBackend.kill`)."""
        return self.kill_all([handle], grace, None if reason is None else [reason])[0]

    def kill_all(
        self,
        handles: Sequence[Handle],
        grace: float = 5.0,
        reasons: Sequence[str] | None = None,
    ) -> list[int | None]:
        """`kill` of each of `handles`, their graces together (`LocalBackend.kill_all`:
        one `grace` for them all, not one per job, and its lines of `reasons`). Results
        in order."""
        mine = [self._own(handle) for handle in handles]
        belows = []
        alive = [handle.process.process.poll() is None for handle in mine]
        table = process_table() if any(alive) else None  # (one /proc scan for them all)
        for handle, running in zip(mine, alive, strict=True):
            below = process_tree(handle.process.pid, table) if running else []
            handle.shm.add(pid for pid, _ in below)
            belows.append(below)
        codes = self._local.kill_all([handle.process for handle in mine], grace, reasons)
        for handle, below in zip(mine, belows, strict=True):
            if handle in self._running:
                self._running.remove(handle)
            for pid, started in below:
                if _start_time(pid) == started:  # still the same process, not a reused pid
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            if not handle.shm.segments:  # a sweep: what a dying rank still holds is kept
                _wait_ended(below)
            self._end(handle)
        return codes

    def close(self) -> None:
        """Kill every job still running (as `kill` does); retry at once the sweeps that
        found files still held (`mpich_segments.SegmentWatch.retry`, waiting up to
        `CLOSE_WAIT` for their holders to end); idempotent."""
        self.kill_all(list(self._running), reasons=[CLOSE_REASON] * len(self._running))
        deadline = time.monotonic() + CLOSE_WAIT
        while self._ending:
            # the last: what is held by the job's own processes is removed, what another
            # job's hold is left, and the record drops the launches (a study ended
            # normally leaves none for its next run)
            self._retry(now=True, last=time.monotonic() >= deadline)
            if self._ending:
                time.sleep(0.1)
        self._local.close()

    def _end(self, handle: MpiexecHandle) -> None:
        """Remove the segments of `handle`'s job, which has ended (`SegmentWatch.remove`);
        keep it for retries if its sweep found files still held."""
        handle.shm.remove(handle.job.name)
        if handle.shm.pending and handle not in self._ending:
            self._ending.append(handle)

    def _retry(self, now: bool = False, last: bool = False) -> None:
        """The retries that are due (`SegmentWatch.retry`) of the ended jobs' sweeps."""
        if self._ending:
            self._ending = [h for h in self._ending if not h.shm.retry(h.job.name, now, last)]

    def describe(self, handle: Handle) -> str:
        process = self._own(handle).process
        return f"{self._local.describe(process)} ({plural(handle.job.ranks, 'rank')})"

    @staticmethod
    def _own(handle: Handle) -> MpiexecHandle:
        if not isinstance(handle, MpiexecHandle):
            raise TypeError(f"not an MpiexecBackend handle: {handle!r}")
        return handle


def _next_to_python(name: str) -> str | None:
    """`name` in the directory of the running Python (a venv's bin, where the mpich wheel
    puts mpiexec), for a trainer started without activating its venv."""
    if os.sep in name:
        return None
    return shutil.which(name, path=str(Path(sys.executable).parent))


#: (children of each pid, start time of each pid) read from /proc at one moment
ProcessTable = tuple[dict[int, list[int]], dict[int, str]]


def process_table() -> ProcessTable:
    """Every process's children and start time, from /proc (empty without /proc)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return children, starts
    for name in entries:
        fields = _stat_fields(int(name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
            starts[int(name)] = fields[19]
    return children, starts


def process_tree(root: int, table: ProcessTable | None = None) -> list[tuple[int, str]]:
    """(pid, start time) of every descendant of `root`, from `table` (default: read now
    from /proc; [] without /proc)."""
    children, starts = process_table() if table is None else table
    out: list[tuple[int, str]] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append((pid, starts[pid]))
        todo.extend(children.get(pid, []))
    return out


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()  # the name may hold blanks and parentheses


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def _wait_ended(processes: list[tuple[int, str]], timeout: float = 1.0) -> None:
    """Wait (bounded) until each of `processes` (pid, start time) has ended or is a
    zombie (its files closed)."""
    deadline = time.monotonic() + timeout
    for pid, started in processes:
        while (fields := _stat_fields(pid)) is not None and fields[19] == started:
            if fields[0] in ("Z", "X") or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
