"""A study that fails mid-poll counts as ended the simulations whose process had already
exited at that moment, not as running (`FailurePolicy.reap_exited`).

The poll that sees the failing simulation's exit raises the study's error before it
polls the jobs after it. Before, a simulation that had exited 0 by then was counted
"1 running" in the error's counts and listed as "running: simulation 1 (...)", and the
stop that followed killed its dead process and recorded it "pending": a resume would
have run again a simulation that had finished.

Here both processes have exited (the launcher's thread, held in the heartbeat, waits for
them: `os.waitid` with ``WNOWAIT`` leaves them for the backend's poll) before the one
tick whose poll sees them: simulation 0 (polled first) exits 3 under
``on_failure="raise"``, simulation 1 exits 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from account_studies import failure, launcher_of

from melissa_trainer.launcher import Launcher, UniformSampler
from melissa_trainer.launcher.study_record import StudyRecord

#: the solver: wait for its gate (a FIFO, opened by the test's heartbeat), then
#: simulation 0 exits 3, simulation 1 exits 0
SOLVER = (
    "import os, sys; sid = int(os.environ['MELISSA_TRAINER_SIMULATION_ID']); "
    "open(os.path.join(%r, 'gate-' + str(sid))).read(); sys.exit(3 if sid == 0 else 0)"
)  # (no braces: the command is a template, `templates`)


class ExitBothInOneTick:
    """The heartbeat (called by the launcher's thread at each tick): the first call
    that finds both jobs launched opens both gates and returns once both processes
    have exited, so that the next tick's poll finds them both ended."""

    def __init__(self, gates: Path) -> None:
        self.gates = gates
        self.launch: Launcher | None = None
        self.done = False

    def __call__(self) -> Mapping[int, int]:
        supervisor = None if self.launch is None else self.launch._supervisor
        if self.done or supervisor is None or len(supervisor.jobs) < 2:
            return {}
        self.done = True
        pids = [job.handle.pid for job in supervisor.jobs.values()]  # type: ignore[attr-defined]
        for sid in (0, 1):
            os.close(os.open(self.gates / f"gate-{sid}", os.O_WRONLY))  # (waits for its reader)
        for pid in pids:  # (exited, not reaped: the backend's poll reaps it)
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        return {}


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_simulation_exited_when_the_study_failed_is_not_counted_running(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    for sid in (0, 1):
        os.mkfifo(gates / f"gate-{sid}")
    heartbeat = ExitBothInOneTick(gates)
    launch = launcher_of(
        SOLVER % str(gates), 2, job_limit=2, log_dir=tmp_path / "logs",
        on_failure="raise",
    )  # fmt: skip
    heartbeat.launch = launch
    launch.start(tmp_path / "rendezvous", heartbeat=heartbeat)
    try:
        message = str(failure(launch, 30.0))
    finally:
        launch.stop()
    assert heartbeat.done
    assert "simulation 0 failed once (exit codes [3]" in message, message
    assert (
        "study of 2 simulations: 1 finished, 0 abandoned, 1 failed (not replaced), 0 running, "
        "0 exited, 0 pending (= 2)"
    ) in message, message
    assert "running: simulation 1" not in message, message
    # the records agree, after the stop too: its finish is not undone into "pending"
    assert {o.simulation_id: o.status for o in launch.outcomes()} == {0: "failed", 1: "finished"}
    summary = launch.summary()
    assert (summary["finished"], summary["running"], summary["pending"]) == (1, 0, 0), summary


def test_a_failed_exit_found_after_the_study_failed_is_pending_with_its_code() -> None:
    # (no policy: not restarted, not given up, the sampler not told; a resume runs it)
    study = StudyRecord(
        UniformSampler({"x": (0.0, 1.0)}, seed=0), 3, max_restarts=1, on_failure="redraw",
        max_redraws=3, first_simulation_id=0,
    )  # fmt: skip
    study.data_reported = True
    for _ in range(3):
        study.take(0.0)
    assert study.ended_as_study_failed(0, 1.0, 3) == "pending"
    assert study.ended_as_study_failed(1, 1.0, 0) == "exited"  # (its data not in yet)
    study.data_complete(2)
    assert study.ended_as_study_failed(2, 1.0, 3) == "finished"  # (its data all in)
    assert study.records[0].exit_codes == [3] and study.records[0].restarts == 0
    assert list(study.queue) == [0] and study.redraws == 0
    summary = study.summary(1.0)
    assert (summary["pending"], summary["exited"], summary["finished"]) == (1, 1, 1), summary
    assert summary["restarts"] == 0 and summary["running"] == 0, summary
