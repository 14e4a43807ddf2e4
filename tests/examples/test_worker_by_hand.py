"""An example's solver run with ``--worker`` by hand (no launcher) says in one line what
is missing and how its workers are started, exit status 2 (a usage error), no traceback.
Before, each printed the `RuntimeError` traceback of the library's first request
(`worker.WorkerClient`: "next_simulation() works in a job started by ..."), exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# (a process of its own each, as a user runs it)
pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"
#: the examples whose solver.py takes --worker
WORKER_SOLVERS = ("heat_pde", "lorenz", "navier_stokes")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", WORKER_SOLVERS)
def test_a_worker_run_by_hand_is_one_line_naming_what_is_missing(example: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_TRAINER_")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example / "solver.py"), "--worker"],
        capture_output=True, text=True, timeout=100, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    said = lines[0]
    assert said.startswith("solver.py: --worker: not started by a launcher in worker mode: ")
    assert "MELISSA_TRAINER_LAUNCHER and MELISSA_TRAINER_WORKER are not set" in said, said
    assert f"python examples/{example}/train.py --worker" in said, said


def test_every_solver_that_takes_worker_is_checked_above() -> None:
    takes = {p.parent.name for p in EXAMPLES.glob("*/solver.py") if '"--worker"' in p.read_text()}
    assert takes == set(WORKER_SOLVERS), takes
