"""benchmarks/heat_held_out_cost.py's own part (the held-out set's solves and a pass of
the model over it, apart from the load): it builds the example's set at each size
asked and says so; the example runs themselves are the benchmark's, not a test's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_own_cost_solves_each_size_and_prints_its_line(capsys: pytest.CaptureFixture) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import heat_held_out_cost
    finally:
        sys.path.remove(str(BENCHMARKS))
    heat_held_out_cost.own_cost((3, 1))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" held-out")[0] for line in lines] == ["3", "1"]
    assert all("solved in" in line and "one pass of the model" in line for line in lines)
