"""Simulations of one time step (a steady-state solver's: a parameter-to-field
surrogate's commonest study) on two training ranks, streamed through the library's
client from a launcher's study: the client routes step t of simulation s to rank
``(s + t) % W`` (docs/protocol.md section 3), so 2 one-step simulations give each rank
one sample and the run trains. Before that routing (``t % W``) both went to rank 0 and
the run failed at step 0 with `NoTrainingError`; a study of fewer simulations than
ranks still leaves a rank empty, and still fails saying so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from two_ranks import run_study_script

SCRIPT = Path(__file__).parents[1] / "scripts" / "one_step_study.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]


def run_study(tmp_path: Path, n: int) -> tuple[Any, list[dict[str, Any]], str]:
    return run_study_script(SCRIPT, tmp_path, str(n), timeout=150)


@pytest.mark.timeout(180)
def test_two_one_step_simulations_train_on_two_ranks(tmp_path: Path) -> None:
    proc, ends, said = run_study(tmp_path, 2)
    assert proc.returncode == 0, said
    # each rank trained on its own simulation: s % 2 (before: NoTrainingError at step 0)
    assert [e["ended"] for e in ends] == ["returned", "returned"], said
    assert [e["seen"] for e in ends] == [[0], [1]], said
    assert ends[0]["steps"] == ends[1]["steps"] >= 1, said


@pytest.mark.timeout(180)
def test_one_simulation_on_two_ranks_still_fails_saying_why(tmp_path: Path) -> None:
    proc, ends, said = run_study(tmp_path, 1)
    assert proc.returncode != 0, said
    assert [(e["ended"], e["steps"]) for e in ends] == [("NoTrainingError", 0)] * 2, said
    (full,) = [x for x in proc.stderr.splitlines() if "no training step" in x]
    assert "stream of rank 1 ended with no sample" in full, said
    assert "fewer simulations than ranks" in full, said
