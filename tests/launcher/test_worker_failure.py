"""Worker mode with a solver that fails for some parameters: the worker catches the
failure and reports it (`next_simulation(exit_code=1)`), the launcher counts a failed
attempt (restarted, then redrawn) and the worker lives on, its start-up not paid again.
Before, the only way to report a failure was to exit, and each failure cost a worker's
start-up (20 s for a solver that builds its mesh). Likewise `serve_simulations` with a
simulation whose close could not deliver (exit code 75): restarted on the same worker."""

from __future__ import annotations

import logging
import re
import sys
import textwrap
from pathlib import Path

import pytest
from study_runs import study_to_its_end

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: one line per simulation run ("pid id"), in the file argv[1]; x > 0.5 fails after
#: its first step, caught by the worker
WORKER = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

code = 0
while (work := next_simulation(timeout=30, exit_code=code)) is not None:
    sid, parameters = work
    with open(sys.argv[1], "a") as runs:
        runs.write(f"{os.getpid()} {sid}\n")
    code = 0
    try:
        with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters) as c:
            for t in range(3):
                c.send(t, u=np.full(4, parameters["x"] + t, np.float32))
                if parameters["x"] > 0.5:
                    raise FloatingPointError("the solver diverged")
    except FloatingPointError:
        code = 1
"""


def run_study(tmp_path: Path, worker: str) -> tuple[list[list[str]], dict, list]:
    """Run a 3-simulation study of `worker` (one at a time, a restart each) to its end:
    (the lines of its runs file, the outcomes by id, the samples)."""
    script, runs = tmp_path / "worker.py", tmp_path / "runs.txt"
    script.write_text(textwrap.dedent(worker))
    launch = Launcher(
        [sys.executable, str(script), str(runs)],
        [{"x": 0.1}, {"x": 0.9}, {"x": 0.2}, {"x": 0.3}],  # the 4th: 1's replacement
        3,
        job_limit=1,
        worker=True,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=1),
    )
    end = study_to_its_end(launch, tmp_path / "rdv")
    return [line.split() for line in runs.read_text().splitlines()], end.outcomes, end.samples


@pytest.mark.timeout(120)
def test_a_worker_reports_its_simulations_failure_and_goes_on(tmp_path: Path) -> None:
    ran, outcomes, samples = run_study(tmp_path, WORKER)
    # the oracle: one worker process ran every simulation, 1 twice (its restart)
    assert len({pid for pid, _ in ran}) == 1, ran
    assert sorted(int(sid) for _, sid in ran) == [0, 1, 1, 2, 3]
    assert outcomes[1].status == "failed" and list(outcomes[1].exit_codes) == [1, 1]
    assert [outcomes[s].status for s in (0, 2, 3)] == ["finished"] * 3
    finished = {(int(s["simulation_id"]), int(s["time_step"])) for s in samples}
    assert {(s, t) for s in (0, 2, 3) for t in range(3)} <= finished


def test_an_exit_code_that_is_not_an_int_is_refused_before_any_request() -> None:
    from melissa_trainer.client.worker import WorkerClient

    client = WorkerClient(endpoint="tcp://127.0.0.1:1", name="w", timeout=0.1)
    with pytest.raises(ValueError, match="exit_code must be an int"):
        client.next_simulation(exit_code=True)  # (a bool is not an exit code)
    client.close()


@pytest.mark.timeout(120)
def test_a_worker_that_reports_a_failure_as_finished_is_told_how_to_report_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that catches the failure but asks for more as if it had finished: the
    data is incomplete, a failed attempt all the same, and the warning says what the
    worker did (not "it exited 0") and how to report a failure."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    _, outcomes, _ = run_study(tmp_path, WORKER.replace("code = 1", "code = 0"))
    assert outcomes[1].status == "failed"
    said = [r.getMessage() for r in caplog.records if "did not all arrive" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert said[0].startswith(
        "simulation 1 attempt 0: its worker reported it finished but its data did not all arrive"
    ), said[0]
    assert said[0].endswith("reports it: next_simulation(exit_code=1)"), said[0]


#: `serve_simulations` with simulation 1's first attempt streaming to a port where no
#: receiver listens (127.0.0.1:1 refuses every connection): its close gives up after
#: close_timeout with a real `DeliveryFailed` (the close's own, not one raised here)
SERVED = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.worker import serve_simulations
from melissa_trainer.client.worker_given import given_attempt

def run(sid, parameters, context):
    with open(sys.argv[1], "a") as runs:
        runs.write(f"{os.getpid()} {sid}\n")
    wrong = {"endpoints": "tcp://127.0.0.1:1"} if sid == 1 and given_attempt(1) == 0 else {}
    with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters,
                context=context, tuning=ClientTuning(close_timeout=0.5), **wrong) as c:
        for t in range(3):
            c.send(t, u=np.full(4, parameters["x"] + t, np.float32))

serve_simulations(run, timeout=30)
"""


@pytest.mark.timeout(120)
def test_a_simulation_not_delivered_is_a_failed_attempt_on_the_same_worker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A simulation whose close could not deliver (`DeliveryFailed`) is reported failed
    with `NOT_DELIVERED_EXIT_CODE`: the launcher counts the attempt and restarts it, as a
    dead worker's, and the same worker process runs the restart and the rest (before: the
    worker exited 1 and was relaunched, a new pid, paying its start-up again)."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    ran, outcomes, samples = run_study(tmp_path, SERVED)
    assert len({pid for pid, _ in ran}) == 1, ran  # one process, its start-up paid once
    assert [int(sid) for _, sid in ran] == [0, 1, 1, 2], ran
    assert list(outcomes[1].exit_codes) == [75, 0], outcomes[1]  # NOT_DELIVERED_EXIT_CODE
    assert [outcomes[s].status for s in (0, 1, 2)] == ["finished"] * 3
    # the launcher's line, as for a worker that died (there: "exit 1"), its log named;
    # the code in words (before: a bare "exit 75", read as the solver's own failure)
    failed = [r.getMessage() for r in caplog.records if "attempt 0 failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].startswith(
        "simulation 1 attempt 0 failed (exit 75 (not delivered: the trainer did not take "
        "its data or confirm its end, and the worker went on; the worker's log says why),"
    ), failed
    assert "restart 1 of 1; log: " in failed[0], failed
    steps = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert steps == [(s, t) for s in (0, 1, 2) for t in range(3)], steps  # each once
    log = list(tmp_path.rglob("worker-*.log"))  # (the launcher's job logs)
    said = [line for p in log for line in p.read_text().splitlines() if "exit code 75" in line]
    assert len(said) == 1 and "exit code 75, and goes on" in said[0], (log, said)
    named = re.findall(r"simulation 1\b", said[0])
    assert len(named) == 1, said  # named once (before: "simulation 1: simulation 1 rank 0")
