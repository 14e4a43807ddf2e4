"""A process stopped by SIGSTOP, every thread of it (`stop`, `stopped`): a suspended
Slurm job or a debugged trainer, for the predict tests of the Python and C clients
(tests/client/test_predict_handshake_silent.py, tests/c/test_c_predict_unanswered.py,
tests/c/test_c_predict_handshake_silent.py). Linux only (it reads /proc)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from waiting import wait_until

__all__ = ["stop", "stopped"]


def stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (a signal is delivered
    asynchronously: its libzmq I/O thread may complete a handshake meanwhile)."""
    tasks = Path(f"/proc/{pid}/task")
    states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
    return all(state in "tT" for state in states)


def stop(pid: int) -> None:
    """Send process `pid` SIGSTOP and return once every thread of it is stopped
    (AssertionError past 60 s). The caller sends its SIGCONT."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: stopped(pid), "every thread of the server stopped")
