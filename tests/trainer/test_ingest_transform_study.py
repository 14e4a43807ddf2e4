"""A study whose ingest transform raises: training stops with the transform's error
named (not swallowed, not a hang), the program exits non-zero, and no simulation it
launched outlives it; on one rank and under `accelerate launch` with two (issue 42)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import run_group
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]

SCRIPT = Path(__file__).parents[1] / "scripts" / "ingest_failure_study.py"

SIMULATION = r"""
import json, os
import numpy as np
from melissa_trainer.client import Client

options = json.loads(os.environ["SIM_OPTIONS"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with open(os.path.join(options["pids"], str(os.getpid())), "w"):
    pass
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}, parameters=params) as client:
    for t in range(options["steps"]):
        x = np.array([params["a"], params["b"], t / options["steps"]], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.timeout(240)
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_failing_ingest_transform_fails_the_run_naming_it_and_stops_the_study(
    tmp_path: Path, ranks: int
) -> None:
    simulation = tmp_path / "sim.py"
    simulation.write_text(SIMULATION)
    pids = tmp_path / "pids"
    pids.mkdir()
    argv = [str(SCRIPT), str(tmp_path / "out"), str(simulation), str(pids)]
    if ranks == 1:
        cmd = [sys.executable, *argv]
    else:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate or "accelerate", "launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(held_port()), *argv]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(SCRIPT.parents[2]), env.get("PYTHONPATH")])
    )
    proc = run_group(cmd, timeout=150, cwd=tmp_path, env=env)
    assert proc.returncode != 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "training ended" not in proc.stdout
    # named: the function, the sample, the user's own words (time step 3: rank 1 of 2)
    err = proc.stderr
    assert "the ingest transform ingest_sample=features raised" in err, err[-3000:]
    assert "no gradient for a field of one point" in err, err[-3000:]
    assert "simulation 0, time step 3" in err, err[-3000:]
    launched = [int(p.name) for p in pids.iterdir()]
    assert launched  # the study ran
    wait_until(
        lambda: not [pid for pid in launched if alive(pid)],
        "the simulations' end (none outlives the failed run)",
        60,
        interval=0.1,
    )
