"""A simulation that exits between the stop's reap and its kill is recorded by how it
ended, not as killed (`Supervisor.shutdown`, `Backend.kill`'s result).

A normal stop first records the jobs that exited since the last poll
(`FailurePolicy.reap_exited`), then kills the others. Before, one that exited right
after that reap was found dead by its kill and recorded "pending" all the same
(`StudyRecord.interrupted`): one that had exited 0 ran again on resume. Here the order
is forced: the reap is wrapped so that, just after it, the simulation (blocked on a
FIFO) is told its exit code and exits, and the wrapper waits for its end (``waitid``
with ``WNOWAIT``: ended, not reaped, so that the backend's kill is the first to see
it). Exit 0 must be recorded finished; exit 3 a failure of its own, pending with its
code kept, as the reap records one."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest
from launcher_runs import launcher, runs, statuses
from waiting import wait_until

from melissa_trainer.launcher.supervisor import Supervisor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="waitid, FIFOs")

#: records its run, then waits for its exit code on the FIFO argv[2]
SIMULATION = r"""
import os, sys
sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]
attempt = os.environ["MELISSA_TRAINER_ATTEMPT"]
with open(os.path.join(sys.argv[1], "runs.txt"), "a") as f:
    f.write(f"{sid} {attempt} {os.getpid()}\n")
with open(sys.argv[2]) as fifo:
    sys.exit(int(fifo.read()))
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("code", [0, 3])
def test_a_simulation_that_exits_between_the_reap_and_the_kill_is_recorded_ended(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    fifo = tmp_path / "exit-code"
    os.mkfifo(fifo)
    (tmp_path / "sim.py").write_text(textwrap.dedent(SIMULATION))
    sim = [sys.executable, str(tmp_path / "sim.py"), str(tmp_path), str(fifo)]
    reap = Supervisor.reap_exited
    forced: list[str] = []

    def reap_then_exit(self: Supervisor, when: str = "when the study failed") -> None:
        reap(self, when)
        if when != "before the stop":
            return
        ((_, _, pid),) = runs(tmp_path)
        with open(fifo, "w") as tell:  # (blocks until the simulation reads: an event)
            tell.write(str(code))
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # its end, not reaped
        assert ended is not None and ended.si_status == code
        forced.append(when)

    monkeypatch.setattr(Supervisor, "reap_exited", reap_then_exit)
    launch = launcher(sim, 1, tuning={"poll_interval": 3600.0})  # one tick: no poll after
    launch.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 1, "simulation 0 to start", 60.0)
        assert launch.summary()["running"] == 1
    finally:
        launch.stop()
    assert forced == ["before the stop"]  # the order was the forced one
    (outcome,) = launch.outcomes()
    if code:
        # its own failure, no policy applied: pending with its code kept (runs again)
        assert (outcome.status, list(outcome.exit_codes)) == ("pending", [3])
    else:
        assert statuses(launch) == {0: "finished"}
        assert launch.done
    said = [r.getMessage() for r in caplog.records]
    assert any(f"had ended too before the stop's kill (exit {code}" in m for m in said), said
