"""A user's own solver that starts slowly (a sleep at start-up stands in for a JIT), on a
`LocalBackend`: the launcher's start-up advice, when it is said and with which fix,
and worker mode's start-ups counted and timed (issue 44; the studies: `own_solver`)."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from own_solver import run_to_end, solver, startup_advice, study
from waiting import wait_until

from melissa_trainer.launcher.backends.local import LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]


# -- start-up -----------------------------------------------------------------------------

WORKER = r"""
import json, sys, time
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

time.sleep(json.loads(sys.argv[1])["startup"])  # once per job
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    client = Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters)
    for t in range(3):
        client.send(t, u=np.full(4, parameters["x"] + t, np.float32))
    client.close()
"""


@pytest.mark.timeout(90)
def test_a_start_up_that_dominates_is_told_once_with_worker_mode_as_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    startup = 3.0  # (a JIT's compile time), then 3 steps sent at once
    sim = solver(tmp_path, startup=startup)
    launch, receiver, buffer = study(tmp_path, sim, 3, {"x": (0, 1)}, job_limit=3)
    assert run_to_end(launch, receiver, buffer) == 9
    told = startup_advice(caplog)
    assert len(told) == 1, told  # once per study, not once per simulation
    assert "before its first message" in told[0] and "Launcher(..., worker=True)" in told[0]
    summary = launch.summary()  # the split: start-up within the simulations' wall time
    assert 0 < summary["startup_seconds"] <= summary["simulation_seconds"]


@pytest.mark.timeout(90)
def test_no_start_up_advice_for_a_quick_start_nor_in_worker_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    # (time steps of 1.5 s: a start-up slowed by a loaded machine, its imports taking
    # seconds, is still not most of the run)
    quick = solver(tmp_path, step_time=1.5)
    launch, receiver, buffer = study(tmp_path, quick, 2, {"x": (0, 1)}, job_limit=2)
    assert run_to_end(launch, receiver, buffer) == 6
    assert startup_advice(caplog) == []
    assert launch.summary()["startup_seconds"] > 0  # measured all the same
    # worker mode: the same slow start-up, paid once per job: nothing to advise
    (tmp_path / "w").mkdir()
    path = tmp_path / "w" / "worker.py"
    path.write_text(textwrap.dedent(WORKER))
    argv = [
        sys.executable,
        str(path),
        json.dumps({"startup": 3.0}).replace("{", "{{").replace("}", "}}"),
    ]
    launch, receiver, buffer = study(tmp_path / "w", argv, 4, {"x": (0, 1)}, worker=True)
    assert run_to_end(launch, receiver, buffer) == 12
    assert startup_advice(caplog) == []


WORKER_MARKING = r"""
import os, sys, time
from pathlib import Path
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client import Client
import numpy as np

time.sleep(float(sys.argv[1]))  # the start-up, once per job
Path(sys.argv[2], os.environ["MELISSA_TRAINER_WORKER"]).write_text("")  # (asks next)
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters) as client:
        for t in range(3):
            client.send(t, u=np.full(4, parameters["x"] + t, np.float32))
"""


@pytest.mark.timeout(90)
def test_worker_mode_counts_each_workers_start_up(tmp_path: Path) -> None:
    """In worker mode the start-up is the worker's, paid once: `startup_seconds` holds
    each worker's launch-to-first-request (it was 0.0 however slow the solver's start).
    The oracle: every worker that asked slept `startup` s first (a marker file each)."""
    startup = 2.0
    path, marks = tmp_path / "worker.py", tmp_path / "marks"
    path.write_text(textwrap.dedent(WORKER_MARKING))
    marks.mkdir()
    argv = [sys.executable, str(path), str(startup), str(marks)]
    launch, receiver, buffer = study(tmp_path, argv, 4, {"x": (0, 1)}, worker=True, job_limit=2)
    assert run_to_end(launch, receiver, buffer) == 12
    workers = len(list(marks.iterdir()))
    assert workers >= 1
    summary = launch.summary()
    # (a lower bound on the workers' own sleeps, on the monotonic clock the launcher reads
    # at their launch and first request: deterministic however loaded the machine)
    assert summary["startup_seconds"] >= startup * workers, summary


WORKER_HALFWAY = r"""
import os, sys, time
from pathlib import Path
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client import Client
import numpy as np

name, half = os.environ["MELISSA_TRAINER_WORKER"], float(sys.argv[1]) / 2
time.sleep(half)
Path(sys.argv[2], name + ".half").write_text("")  # (its launch returns only now)
time.sleep(half)
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters) as client:
        client.send(0, u=np.full(4, parameters["x"], np.float32))
"""


@pytest.mark.timeout(90)
def test_a_worker_start_up_is_timed_from_before_its_launch_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend slow to return from its launch (or a launcher thread descheduled on a
    loaded node) hid that part of a worker's start-up: the clock started once the launch
    had returned. Here each launch returns only once its worker has slept half of its
    start-up (a marker file: an event, not a delay), so a clock read after the launch
    counts at most the other half."""
    startup = 2.0
    path, marks = tmp_path / "worker.py", tmp_path / "marks"
    path.write_text(textwrap.dedent(WORKER_HALFWAY))
    marks.mkdir()
    launch_first = LocalBackend.launch

    def launch_slowly(self: LocalBackend, job: Any) -> Any:
        handle = launch_first(self, job)
        half = marks / (job.env["MELISSA_TRAINER_WORKER"] + ".half")
        wait_until(half.exists, timeout=30)
        return handle

    monkeypatch.setattr(LocalBackend, "launch", launch_slowly)
    argv = [sys.executable, str(path), str(startup), str(marks)]
    launch, receiver, buffer = study(tmp_path, argv, 2, {"x": (0, 1)}, worker=True, job_limit=1)
    assert run_to_end(launch, receiver, buffer) == 2
    workers = len(list(marks.iterdir()))
    assert workers >= 1
    # (each worker slept `startup` s between its launch and its first request)
    assert launch.summary()["startup_seconds"] >= startup * workers, launch.summary()


@pytest.mark.parametrize(("load", "said"), [(9.0, True), (0.1, False)])
def test_the_start_up_advice_says_when_the_machine_is_loaded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, load: float, said: bool
) -> None:
    """On a loaded machine every start-up is slower: the advice says so, with the load,
    so that a user of the examples on a busy node does not rewrite a quick solver."""
    from melissa_trainer.launcher import advice

    monkeypatch.setattr(advice.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(advice.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    told = advice.Advice(worker_mode=False)
    told.first_message(7, startup=3.0, client="python")
    told.ended(7, 0, wall=4.0)
    (message,) = startup_advice(caplog)
    assert ("load average 9.0 on 2 usable cores" in message) is said, message
    assert message.endswith("Said once per study.")
