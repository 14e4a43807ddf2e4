"""`serve_simulations` under a real launcher in worker mode: a solver script built on it,
one parameter set refused by its `check` and one failure caught and returned by its
`run` (the loop's contract on a stand-in launcher: tests/client/test_worker_serve.py).

The oracles: the launcher's record of each attempt's exit code; the receiver's samples,
each (simulation, step) counted; the script's own record of the process that ran each
simulation; the worker's log; /proc for the processes left."""

from __future__ import annotations

import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from process_tree import processes_with
from worker_launch import run_study_to_end

from melissa_trainer.launcher import LauncherTuning

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
    # no restart: each simulation's one attempt, its exit code recorded once
    tuning = LauncherTuning(poll_interval=0.05, max_restarts=0, on_failure="abandon")
    command = [sys.executable, str(script), str(runs)]
    record, samples = run_study_to_end(command, parameters, rendezvous, tuning)
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
