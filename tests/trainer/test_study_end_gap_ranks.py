"""Two real training ranks (``accelerate launch --multi_gpu --num_processes 2``, gloo
on CPU): rank 1 lacks a simulation that rank 0's launcher counts finished (the solver's
messages to rank 1 are lost). Rank 0 tells rank 1 the study has ended (STUDY_END), and
the run fails with rank 1's error naming the simulation, its rank and the fix, in a
bounded time: before, rank 1 waited in silence for its stall timeout (600 s) while rank 0
waited at the end of its loop (the run outlasted this test's bound).

With the default buffer (a rate-limited reservoir), rank 0 cannot take in its last
simulations' data while it waits for rank 1, so its launcher never counts them finished:
the STUDY_END goes once every job has exited and nothing is left to start. Before that
(the notice waited for every simulation finished), the reservoir run waited for rank 1's
stall timeout (600 s) and outlasted this test's bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import study_end_gap  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]


def run_gap(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`study_end_gap.py` on two ranks, its solver written to `tmp_path`."""
    solver = tmp_path / "solver.py"
    solver.write_text(study_end_gap.SOLVER)
    return launch_two_ranks(
        SCRIPTS / "study_end_gap.py", str(tmp_path / "out"), str(solver), *args, timeout=150
    )


@pytest.mark.timeout(200)
def test_a_rank_lacking_a_finished_simulation_fails_the_run_naming_it(tmp_path: Path) -> None:
    proc = run_gap(tmp_path)
    said = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.returncode != 0, said
    assert "training ended" not in proc.stdout, said
    # rank 1 says it once, in one line (no traceback), with how to go on; rank 0 names
    # rank 1 and its error (`trainer.rank_failure`: tests/trainer/test_rank_failure.py)
    lines = [x for x in proc.stderr.splitlines() if "rank 1 lacks the data" in x]
    (line,) = [x for x in lines if not x.startswith("rank 1 failed: ")]
    assert line.startswith("training stopped at step "), said
    assert "the study has ended, and rank 1 lacks the data of 1 of the 3 simulations" in line
    assert "simulation 1: rank 1's receiver has no HELLO from it" in line, said
    assert "A run resumed from a checkpoint runs it again" in line, said
    assert "once the cause is fixed" in line, said


@pytest.mark.timeout(200)
def test_with_the_rate_limited_reservoir_rank_1_fails_fast_too(tmp_path: Path) -> None:
    proc = run_gap(tmp_path, "reservoir")
    said = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.returncode != 0, said
    assert "training ended" not in proc.stdout, said
    lines = [x for x in proc.stderr.splitlines() if "rank 1 lacks the data" in x]
    (line,) = [x for x in lines if not x.startswith("rank 1 failed: ")]
    assert line.startswith("training stopped at step "), said
    # (how many of the 6 the launcher counts finished depends on how far rank 0 got)
    assert "simulation 2: rank 1's receiver has no HELLO from it" in line, said
    assert "waits for stall_timeout" not in said and "StallError" not in said, said
