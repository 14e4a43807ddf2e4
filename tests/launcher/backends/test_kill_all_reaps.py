"""`LocalBackend.kill_all` ends each job's group right after reaping its leader, before
it waits for any other job.

`_finish` SIGKILLs the group of an ended job's leader by its pid: safe only while that
id cannot name another group, that is right after the reap (a pid freed with no group
member left may be given to a new process, which may lead a group of its own). Before,
`kill_all` reaped a job that had ended since the last poll (its look before the
signals), or one that the SIGTERM ended (its wait), and finished every job only after
the last one's wait: up to `grace` s (and the SIGKILLed jobs' ends) later, with a
SIGKILL then sent to a group id freed that long before, and the ended job's leftovers
running meanwhile. The oracle is the order of the backend's own steps, not a clock."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from melissa_trainer.launcher.backends import Job, LocalBackend
from melissa_trainer.launcher.backends.local import LocalHandle

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="waitid"),
    pytest.mark.e2e,  # (starts processes)
]


@pytest.mark.timeout(120)
def test_each_job_is_finished_right_after_its_reap_before_the_next_wait() -> None:
    backend = LocalBackend()
    events: list[tuple[str, str]] = []
    finish = backend._finish

    def finishing(handle: LocalHandle) -> None:
        if not handle.ended:
            events.append(("finish", handle.job.name))
        finish(handle)

    backend._finish = finishing  # type: ignore[method-assign]
    try:
        ended = backend.launch(Job("ended", ["true"]))
        # ended since the last poll, not reaped: the kill's own look reaps it
        os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOWAIT)
        handles = [ended] + [backend.launch(Job(f"sim-{i}", ["sleep", "60"])) for i in (1, 2)]
        for handle in handles:
            wait = handle.process.wait

            def waiting(
                timeout: Any = None, _wait: Any = wait, _name: str = handle.job.name
            ) -> Any:
                events.append(("wait", _name))
                return _wait(timeout=timeout)

            handle.process.wait = waiting  # type: ignore[method-assign]
        # (a long grace: sleep dies of SIGTERM at once; the grace bounds a failure only)
        assert backend.kill_all(handles, grace=60) == [0, None, None]
    finally:
        backend.close()
    assert events.index(("finish", "ended")) < events.index(("wait", "sim-1")), events
    assert events.index(("finish", "sim-1")) < events.index(("wait", "sim-2")), events
    assert [e for e in events if e[0] == "finish"] == [
        ("finish", "ended"),
        ("finish", "sim-1"),
        ("finish", "sim-2"),
    ]
