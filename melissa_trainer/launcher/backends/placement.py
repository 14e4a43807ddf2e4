"""`Placement`: how local simulation processes share this machine with the trainer.

A trainer and its simulations on one machine (a workstation, a GPU node) compete for its
cores. The trainer's host thread is the study's critical path: every step waits on it,
and on a GPU node a starved host thread is an idle GPU. The simulations are throughput:
a few percent of a core less for them costs a few percent of the data. So, by default,
`LocalBackend` starts every job:

* **at a lower priority**: niceness ``+nice`` (default 10) relative to the trainer's,
  applied by ``nice -n`` in front of the command (exec'd in place: the job's pid, argv
  and exit status are its command's), so every thread and child of the job has it from
  its first instruction. When the CPU is contended, a nice-0 thread gets about 9 times
  the CPU of a nice-10 one: the trainer keeps its core, the simulations take every
  cycle the trainer leaves. On an idle core a niced job runs at full speed.
* **in the trainer's session**, in a process group of its own (as torchrun's workers
  are), not in a new session. On Linux kernels with autogroup scheduling
  (``/proc/sys/kernel/sched_autogroup_enabled``, on by default on desktop and many
  server distributions), each session is a scheduling group that gets an equal share
  of the CPU and niceness only counts *within* a group: a job in a session of its own
  would get as much CPU as the whole trainer, whatever its niceness. The process group
  is what `LocalBackend.kill` signals; the job still has no stdin (``/dev/null``), and
  Ctrl-C in the trainer's terminal is still for the trainer's own group only.
* **with one BLAS/OpenMP thread** (``threads``, default 1): ``OMP_NUM_THREADS``,
  ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``BLIS_NUM_THREADS``,
  ``VECLIB_MAXIMUM_THREADS`` and ``NUMEXPR_NUM_THREADS`` are set to it, as torchrun
  sets ``OMP_NUM_THREADS=1`` for its workers, so that `job_limit` simulations use
  `job_limit` cores, not `job_limit` x cores threads that spin against the trainer's.
  If the job's environment (the trainer's, or the `Launcher`'s ``env``) already sets
  any of them, none is touched: the user's setting wins.
* **on the cores it may use** (``cpus``, default None: the trainer's own affinity):
  a set of CPU ids keeps the simulations off the others, e.g. the trainer's core.

Opting out: ``Placement(nice=0, threads=None)`` keeps the job's priority and threads as
the trainer's; ``LocalBackend(placement=None)`` restores the behaviour before placements
existed (a new session per job, nothing changed). An MPI or GPU solver usually wants
``threads=None`` (or its own ``OMP_NUM_THREADS`` in ``env``); ``mpiexec`` starts its
ranks in sessions of their own, out of reach of the autogroup fix: use ``cpus`` there.

Frozen; checked when made (a bad value raises ValueError naming the field and the fix).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from melissa_trainer.launcher.log_lines import warn

__all__ = ["THREAD_VARIABLES", "Placement", "nice_program", "renice_group"]

logger = logging.getLogger("melissa_trainer.launcher")

#: the variables `Placement.threads` sets: the thread counts of OpenMP and of the BLAS
#: libraries numpy, scipy and torch are built on (threadpoolctl's list)
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
#: the largest niceness Linux and macOS accept
MAX_NICE = 19


@dataclass(frozen=True)
class Placement:
    """Priority, threads and cores of local simulation jobs (see the module docstring).

    Attributes:
        nice: niceness added to the trainer's for each job, 0 to 19 (0: the trainer's
            priority); default 10.
        threads: BLAS/OpenMP threads per job (`THREAD_VARIABLES`), set unless the job's
            environment sets one of them; None: the environment is left as it is.
            Default 1.
        cpus: CPU ids the jobs may run on (a subset of the trainer's affinity, Linux
            only); None (default): the trainer's affinity.

    Raises:
        ValueError: a field out of range or of the wrong type (the message names it).
    """

    nice: int = 10
    threads: int | None = 1
    cpus: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.nice) or not 0 <= self.nice <= MAX_NICE:
            raise ValueError(
                f"Placement.nice must be an integer from 0 (the trainer's priority) to "
                f"{MAX_NICE} (the lowest), not {self.nice!r}"
            )
        if self.threads is not None and (not _is_int(self.threads) or self.threads < 1):
            raise ValueError(
                f"Placement.threads must be an integer >= 1 (BLAS/OpenMP threads per "
                f"simulation), or None to leave the environment as it is, not {self.threads!r}"
            )
        if self.cpus is not None:
            object.__setattr__(self, "cpus", _check_cpus(self.cpus))

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with the thread variables set to `threads`, unless `threads` is None or
        `env` sets any of them already."""
        out = dict(env)
        if self.threads is not None and not any(name in env for name in THREAD_VARIABLES):
            out.update(dict.fromkeys(THREAD_VARIABLES, str(self.threads)))
        return out

    @contextlib.contextmanager
    def affinity(self) -> Iterator[None]:
        """Within: the calling thread may run on `cpus` only, so that a process it starts
        (vfork, fork or clone inherit the calling thread's mask) starts with that
        affinity, every thread it makes after too; restored on exit. No-op without
        `cpus`. Linux: the mask is the calling thread's, not the whole trainer's."""
        if self.cpus is None:
            yield
            return
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.cpus)
        try:
            yield
        finally:
            os.sched_setaffinity(0, saved)


def _check_cpus(cpus: Any) -> frozenset[int]:
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(
            f"Placement.cpus needs Linux (CPU affinity); this is {sys.platform}: leave it None"
        )
    if isinstance(cpus, str | bytes) or not isinstance(cpus, Iterable):
        raise ValueError(
            f"Placement.cpus must be a set of CPU ids, e.g. {{1, 2, 3}}, or None, not {cpus!r}"
        )
    ids = list(cpus)
    if not ids or not all(_is_int(c) and c >= 0 for c in ids):
        raise ValueError(
            f"Placement.cpus must be a non-empty set of CPU ids (integers >= 0), not {cpus!r}"
        )
    allowed = os.sched_getaffinity(0)
    outside = sorted(set(ids) - allowed)
    if outside:
        raise ValueError(
            f"Placement.cpus {sorted(set(ids))} names CPU(s) {outside} that this process "
            f"may not use (its affinity: {sorted(allowed)}): pick among those"
        )
    return frozenset(ids)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def nice_program() -> str | None:
    """The ``nice`` program (coreutils, BSD), or None."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/bin", "/bin"])
    return shutil.which("nice", path=path)


def renice_group(pgid: int, nice: int) -> None:
    """Without a ``nice`` program: lower the priority of process group `pgid` (every
    thread of every process in it) by `nice`, just after its start. What the job did
    before this call (a thread, a child in a session of its own) may keep the trainer's
    priority; logged once."""
    if not _renice_warned:
        _renice_warned.append(True)
        warn(
            logger,
            "no `nice` program on PATH: jobs are reniced just after their start (what "
            "a job starts in its first milliseconds may keep the trainer's priority)",
        )
    try:
        os.setpriority(os.PRIO_PGRP, pgid, os.getpriority(os.PRIO_PROCESS, 0) + nice)
    except OSError as exc:  # the job already ended: nothing to renice
        logger.debug("renice of job %d: %s", pgid, exc)


_renice_warned: list[bool] = []
