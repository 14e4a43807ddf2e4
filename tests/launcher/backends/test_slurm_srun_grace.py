"""mode="srun" on the one-node test cluster: a stop gives the steps' solvers their
SIGTERM and one grace for them all (`steps.step_stop`), as the batch mode does.

Failed before: the backend signalled each step's srun, which turns a SIGTERM into a
SIGKILL of its tasks ("srun: forcing job termination"); the solvers, killed at once,
wrote nothing (said.txt absent). The solver is tests/kill_order.py's: on SIGTERM it
writes its line (a restart file's stand-in) and waits for every other solver's, so
"saw-all" from each also says they were signalled together. A solver that ignores
SIGTERM is still ended once the grace is over (its srun signalled, its step cancelled)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kill_order import SOLVER, expected
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from test_slurm_srun_segments import in_allocation

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

N = 2

#: run by salloc in an allocation of N tasks: N steps of argv[1] (kill_order's solver)
#: killed together, then one step of a solver that ignores SIGTERM; prints what it saw
DRIVER = """
import json, os, subprocess, sys, time
from pathlib import Path
from melissa_trainer.launcher.backends import Job, SlurmBackend

N = int(sys.argv[2])


def until(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def steps():
    listing = ["squeue", "-h", "-s", "-j", os.environ["SLURM_JOB_ID"], "-o", "%i|%j"]
    out = subprocess.run(listing, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "|mt-" in line]


here = Path("together").absolute()
here.mkdir()
(here / "solver.py").write_text(sys.argv[1])
backend = SlurmBackend(mode="srun")
backend.begin_study("grace")
solver = [sys.executable, str(here / "solver.py"), str(here), str(N)]
handles = [
    backend.launch(
        Job(f"sim-{i}", solver, {"MELISSA_TRAINER_SIMULATION_ID": str(i)}, here,
            log_path=here / f"{i}.log")
    )
    for i in range(N)
]
until(lambda: len(list(here.glob("*.up"))) == N, "the solvers' start")
out = {"codes": backend.kill_all(handles, grace=30.0)}
out["ends"] = [backend.poll(handle) for handle in handles]

deaf = Path("deaf").absolute()
deaf.mkdir()
(deaf / "solver.py").write_text(
    "import signal, time\\n"
    "signal.signal(signal.SIGTERM, lambda *_: open('term', 'w').close())\\n"
    "open('up', 'w').close()\\n"
    "while True:\\n    time.sleep(1)\\n"
)
handle = backend.launch(Job("deaf", [sys.executable, "solver.py"], cwd=deaf,
                            log_path=deaf / "log"))
until(lambda: (deaf / "up").exists(), "the deaf solver's start")
out["deaf_code"] = backend.kill(handle, grace=1.0)
out["deaf_end"] = backend.poll(handle)
out["deaf_termed"] = (deaf / "term").exists()
out["steps_left"] = until(lambda: not steps() or None, "no step left", 30.0) and steps()
backend.close()
print(json.dumps(out))
"""


@pytest.mark.timeout(300)
def test_srun_steps_get_sigterm_and_one_grace(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    if slurm_cluster.cpus < N:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; {N} steps together need {N}")
    out, stderr = in_allocation(tmp_path, DRIVER, N, SOLVER, str(N), timeout=280)
    said_file = tmp_path / "together" / "said.txt"
    logs = [(tmp_path / "together" / f"{i}.log").read_text() for i in range(N)]
    assert said_file.exists(), f"no solver got a SIGTERM to act on: {logs} {stderr}"
    said = said_file.read_text().splitlines()
    assert sorted(set(said)) == expected(N), (said, logs)
    assert out["codes"] == [None] * N  # (killed: none ended on its own)
    assert all(code not in (None, 0) for code in out["ends"]), out  # (never success)
    # a solver deaf to SIGTERM got it, and was ended after the grace all the same
    assert out["deaf_termed"], out
    assert out["deaf_code"] is None and out["deaf_end"] not in (None, 0), out
    assert out["steps_left"] == [], out
