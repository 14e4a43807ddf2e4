"""main's launch of a simulation, kept to compare with ours in `launch_cost.py`: a
``preexec_fn`` that sets PR_SET_PDEATHSIG in the child, which makes CPython fork the
whole trainer (`ForkPathBackend`: main's `Popen` call reimplemented; polling and
killing are `LocalBackend`'s, the same).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
from collections.abc import Callable

from melissa_trainer.launcher.backends import Job, LocalBackend
from melissa_trainer.launcher.backends.local import LocalHandle


def _main_pdeathsig_setter() -> Callable[[int], None]:
    """main's `_pdeathsig_setter`: prctl looked up in the parent, called in the child."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int
    sigterm = int(signal.SIGTERM)
    getppid, kill, getpid = os.getppid, os.kill, os.getpid

    def set_pdeathsig(parent: int) -> None:
        prctl(1, sigterm, 0, 0, 0)
        if getppid() != parent:
            kill(getpid(), sigterm)

    return set_pdeathsig


class ForkPathBackend(LocalBackend):
    """`LocalBackend` with main's `launch`: ``preexec_fn`` sets PR_SET_PDEATHSIG in the
    child, which makes CPython fork the trainer. Polling and killing are ours (the same)."""

    def __init__(self) -> None:
        super().__init__()
        self._setter = _main_pdeathsig_setter()

    def launch(self, job: Job) -> LocalHandle:
        log = job.open_log()
        process = subprocess.Popen(
            list(job.argv),
            env=job.full_env(),
            cwd=job.cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            preexec_fn=functools.partial(self._setter, os.getpid()),
        )
        handle = LocalHandle(job, process, log)
        self._handles.append(handle)
        return handle
