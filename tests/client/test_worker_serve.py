"""`serve_simulations`, worker mode's loop in the library (what the examples' solvers
use with ``--worker``): a real launcher in worker mode runs a solver script built on
it, one parameter set refused by its `check` and one failure caught by its `run`; and
the loop's contract, on a stand-in for the launcher's answers.

The oracles: the launcher's record of each attempt's exit code; the receiver's samples,
each (simulation, step) counted; the script's own record of the process that ran each
simulation; the worker's log; /proc for the processes left."""

from __future__ import annotations

import sys
import textwrap
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import zmq
from helpers import drain, processes_with

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import worker
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.study_record import records_of
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

STEPS = 3
#: x > 0.5 refused by `check`; x == 0.3 fails in `run` (caught: exit code 3) before it
#: streams; one line "pid id" per simulation `run` is given, in the file argv[1]
SOLVER = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import serve_simulations

def check(parameters):
    if parameters["x"] > 0.5:
        raise ValueError(f"x={parameters['x']} must be <= 0.5")
    return parameters

def run(simulation_id, parameters, context):
    with open(sys.argv[1], "a") as runs:
        runs.write(f"{os.getpid()} {simulation_id}\n")
    if parameters["x"] == 0.3:
        return 3
    with Client({"u": ((4,), "float32")}, simulation_id=simulation_id,
                parameters=parameters, context=context) as client:
        for t in range(STEPS):
            client.send(t, u=np.full(4, parameters["x"] + t, np.float32))
    return None

serve_simulations(run, check=check, timeout=30)
""".replace("STEPS", str(STEPS))


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.timeout(120)
def test_a_worker_on_serve_simulations_fails_only_what_it_refuses(tmp_path: Path) -> None:
    """One worker (job_limit 1) runs four simulations in turn: the refused one (x = 0.9)
    is a failed attempt with exit code 2, the one `run` fails (x = 0.3) one with the
    code it returned, and the others are each streamed, every step received exactly
    once; one process ran them all, and the refusal is in its log."""
    script, runs = tmp_path / "worker.py", tmp_path / "runs.txt"
    script.write_text(textwrap.dedent(SOLVER))
    parameters = [{"x": 0.1}, {"x": 0.9}, {"x": 0.2}, {"x": 0.3}]
    rendezvous = tmp_path / "rendezvous"
    buffer = FIFOBuffer(1000)
    receiver = Receiver(buffer, config=ReceiverConfig(rendezvous_dir=rendezvous))
    receiver.start()
    launch = Launcher([sys.executable, str(script), str(runs)], parameters, len(parameters),
                      job_limit=1, backend=LocalBackend(), worker=True,
                      tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0,
                                            max_restarts=0, on_failure="abandon"))  # fmt: skip
    try:
        launch.start(rendezvous, heartbeat=receiver.activity, data=receiver)
        deadline = time.monotonic() + 90
        while not launch.done:  # every simulation finished or given up, its data received
            launch.check()
            assert time.monotonic() < deadline, "the study did not end"
            time.sleep(0.02)
        record = records_of(launch.state_dict())
    finally:
        launch.stop()
        receiver.stop()
    buffer.close()  # (the stream ends here, every attempt over)
    samples = drain(buffer, timeout=5)
    codes = {sid: r["exit_codes"] for sid, r in record.items()}
    assert codes == {0: [0], 1: [2], 2: [0], 3: [3]}, codes
    keys = Counter((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == Counter({(s, t): 1 for s in (0, 2) for t in range(STEPS)})
    ran = [line.split() for line in runs.read_text().splitlines()]
    assert [int(sid) for _, sid in ran] == [0, 2, 3]  # (1 never reached `run`)
    assert len({pid for pid, _ in ran}) == 1, ran
    log = (tmp_path / "logs" / "worker-0.log").read_text()
    assert "worker.py: simulation 1: x=0.9 must be <= 0.5" in log, log
    assert processes_with(str(rendezvous)) == []


class StandInLauncher:
    """A stand-in for the launcher's answers: `next_simulation` gives `work` in turn,
    then None, and records each exit code it is given."""

    def __init__(self, work: list[tuple[int, dict[str, float]]]) -> None:
        self.work = list(work)
        self.codes: list[int] = []

    def next_simulation(
        self, timeout: float | None = 60.0, exit_code: int = 0
    ) -> tuple[int, dict[str, float]] | None:
        self.codes.append(exit_code)
        return self.work.pop(0) if self.work else None


def serve(
    monkeypatch: pytest.MonkeyPatch, work: list[tuple[int, dict[str, float]]], run: Any
) -> StandInLauncher:
    """`serve_simulations(run, check)` against a stand-in launcher giving `work`; `check`
    refuses x < 0."""

    def check(parameters: dict[str, float]) -> Mapping[str, float]:
        if parameters["x"] < 0:
            raise ValueError(f"x={parameters['x']} must be >= 0")
        return {"x": 2 * parameters["x"]}

    launcher = StandInLauncher(work)
    monkeypatch.setattr(worker, "next_simulation", launcher.next_simulation)
    worker.serve_simulations(run, check=check)
    return launcher


def test_the_loop_reports_each_outcome_with_the_next_request_on_one_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    given: list[tuple[int, Mapping[str, float], zmq.Context]] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> Any:
        given.append((simulation_id, parameters, context))
        return {5: 1, 6: 0}.get(simulation_id)  # 5 failed, 6 finished (0), 7 (None)

    work = [(4, {"x": -1.0}), (5, {"x": 1.0}), (6, {"x": 2.0}), (7, {"x": 3.0})]
    launcher = serve(monkeypatch, work, run)
    # the first request reports nothing; then 4 refused (2), 5 failed (1), 6 and 7 finished
    assert launcher.codes == [0, worker.REFUSED_EXIT_CODE, 1, 0, 0]
    assert [(s, dict(p)) for s, p, _ in given] == [
        (5, {"x": 2.0}),
        (6, {"x": 4.0}),
        (7, {"x": 6.0}),
    ]
    contexts = {id(c) for _, _, c in given}
    assert len(contexts) == 1 and given[0][2].closed  # one, for the worker's life, ended
    assert "simulation 4: x=-1.0 must be >= 0" in capsys.readouterr().err


def test_an_exception_from_run_ends_the_loop_and_its_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts: list[zmq.Context] = []

    def run(simulation_id: int, parameters: Mapping[str, float], context: zmq.Context) -> None:
        contexts.append(context)
        raise FloatingPointError("diverged")

    with pytest.raises(FloatingPointError, match="diverged"):
        serve(monkeypatch, [(0, {"x": 1.0}), (1, {"x": 1.0})], run)
    assert len(contexts) == 1 and contexts[0].closed  # not asked for the next


def test_a_run_that_returns_no_exit_code_is_told_what_to_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=r"run returned 'done' for simulation 0: return None"):
        serve(monkeypatch, [(0, {"x": 1.0})], lambda *_: "done")
    with pytest.raises(ValueError, match="run returned True"):  # (a bool is not one)
        serve(monkeypatch, [(0, {"x": 1.0})], lambda *_: True)
