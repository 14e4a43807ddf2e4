"""One way for tests to wait on what sends them no event: poll it under a deadline.

Most waits in these tests block on an event (a process's exit, a socket's message, a
line read). What is left is state in another thread or process that signals nothing:
a counter, a file another process writes, a job queue. `wait_until` polls it, fails
with what it waited for once `timeout` seconds pass, and fails at once when a process
that should produce it has ended instead, so a crash reads as a crash, not as a timeout.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable

__all__ = ["wait_until"]


def wait_until(
    ready: Callable[[], object],
    what: str | Callable[[], object] = "the condition",
    timeout: float = 60.0,
    *,
    procs: Iterable[subprocess.Popen] = (),
    interval: float = 0.01,
) -> None:
    """Return once `ready()` is truthy; raise AssertionError past `timeout` (seconds),
    or as soon as one of `procs` has exited.

    `what` names the wait in the failure (a callable is evaluated only on failure, for a
    message that shows the state at that moment). `interval` is the poll period in
    seconds: a bound on the latency, not a sleep the test depends on."""
    watched = list(procs)
    deadline = time.monotonic() + timeout
    while not ready():
        ended = [(p.args, p.returncode) for p in watched if p.poll() is not None]
        if ended:
            raise AssertionError(f"ended before {_said(what)}: {ended}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {_said(what)}")
        time.sleep(interval)


def _said(what: str | Callable[[], object]) -> str:
    return what if isinstance(what, str) else str(what())
