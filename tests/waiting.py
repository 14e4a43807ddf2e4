"""One way for tests to wait on what sends them no event: poll it under a deadline.

Most waits in these tests block on an event (a process's exit, a socket's message, a
line read). What is left is state in another thread or process that signals nothing:
a counter, a file another process writes, a job queue. `wait_until` polls it, fails
with what it waited for once `timeout` seconds pass, and fails at once when a process
that should produce it has ended instead, so a crash reads as a crash, not as a timeout.

A wait whose failure can only mean "too slow" (a thread or process that does what it
must, late on a loaded machine) takes `UNTIL_TEST_TIMEOUT`: it fails shortly before the
running test's own timeout (`set_test_timeout`, which tests/conftest.py calls for each
test from its pytest-timeout setting), with its message, not by the timeout's stack dump,
and never sooner than the budget the test was given. A short fixed bound (10 s) made such
waits fail on a loaded 2-core machine while the test had time left.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable, Iterable

__all__ = ["UNTIL_TEST_TIMEOUT", "set_test_timeout", "wait_until"]

#: `wait_until(timeout=UNTIL_TEST_TIMEOUT)`: until shortly before the test's timeout
UNTIL_TEST_TIMEOUT = math.inf
#: outside a test with a timeout (a script importing this module): the bound of such a wait
NO_TEST_TIMEOUT = 120.0
#: the share of the test's timeout left to its teardown (and the failure's report) after a
#: `UNTIL_TEST_TIMEOUT` wait fails, at least `MIN_MARGIN` s
MARGIN = 0.15
MIN_MARGIN = 2.0

#: when (time.monotonic) the running test's `UNTIL_TEST_TIMEOUT` waits fail; None: no test
_deadline: float | None = None


def set_test_timeout(timeout: float | None) -> None:
    """A test starts now with `timeout` seconds (its pytest-timeout setting; None or 0:
    none): its `UNTIL_TEST_TIMEOUT` waits fail `MARGIN` of it (at least `MIN_MARGIN` s)
    before it ends."""
    global _deadline
    if not timeout:
        _deadline = None
        return
    _deadline = time.monotonic() + timeout - max(MIN_MARGIN, MARGIN * timeout)


def wait_until(
    ready: Callable[[], object],
    what: str | Callable[[], object] = "the condition",
    timeout: float = 60.0,
    *,
    procs: Iterable[subprocess.Popen] = (),
    interval: float = 0.01,
) -> None:
    """Return once `ready()` is truthy; raise AssertionError past `timeout` (seconds;
    `UNTIL_TEST_TIMEOUT`: shortly before the running test's timeout), or as soon as one
    of `procs` has exited.

    `what` names the wait in the failure (a callable is evaluated only on failure, for a
    message that shows the state at that moment). `interval` is the poll period in
    seconds: a bound on the latency, not a sleep the test depends on."""
    watched = list(procs)
    if timeout == UNTIL_TEST_TIMEOUT:
        deadline = _deadline if _deadline is not None else time.monotonic() + NO_TEST_TIMEOUT
        said = "until shortly before the test's timeout"
    else:
        deadline = time.monotonic() + timeout
        said = f"after {timeout:g} s"
    while not ready():
        ended = [(p.args, p.returncode) for p in watched if p.poll() is not None]
        if ended:
            raise AssertionError(f"ended before {_said(what)}: {ended}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out {said} waiting for {_said(what)}")
        time.sleep(interval)


def _said(what: str | Callable[[], object]) -> str:
    return what if isinstance(what, str) else str(what())
