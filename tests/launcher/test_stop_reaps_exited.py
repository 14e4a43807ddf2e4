"""A normal stop records the simulations that exited since the launcher's last poll as
ended, not killed (`Supervisor.shutdown` -> `FailurePolicy.reap_exited`).

Before, the stop killed every job it held, the exited ones too, and recorded each
simulation "pending" (`StudyRecord.interrupted`): one that had exited 0 just before the
stop ran again on resume, its work done twice. Here the launcher's one tick launches
simulation 0 (a poll interval of an hour: no poll sees its exit), which exits 0; the
stop must record it finished, and a resumed study must not run it again."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from launcher_runs import alive, command, launcher, run_study, runs, statuses
from waiting import wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc")


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("code", [0, 3])
def test_a_simulation_that_exited_before_the_stop_is_recorded_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, code: int
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    sim = command(tmp_path, "exit", fail=[0], code=code) if code else command(tmp_path, "exit")
    first = launcher(sim, 1, tuning={"poll_interval": 3600.0})
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 1, "simulation 0 to start", 60.0)
        ((_, _, pid),) = runs(tmp_path)
        wait_until(lambda: not alive(pid), "simulation 0 to exit", 60.0)  # (a zombie: exited)
        assert first.summary()["running"] == 1  # (no poll has seen it exit)
    finally:
        first.stop()
    said = [r.getMessage() for r in caplog.records]
    assert not any(m.startswith("stopping: killing") for m in said), said
    state = json.loads(json.dumps(first.state_dict()))
    if code:
        # a failure, no policy applied: pending, its exit code kept (it runs again)
        assert statuses(first) == {0: "pending"}
        assert any("had ended too before the stop (exit 3" in m for m in said), said
        return
    assert statuses(first) == {0: "finished"}
    assert first.done
    second = launcher(sim, 1, tuning={"poll_interval": 0.05})
    second.load_state_dict(state)
    assert second.summary()["pending"] == 0
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    assert [(sid, attempt) for sid, attempt, _ in runs(tmp_path)] == [(0, 0)]  # not again
