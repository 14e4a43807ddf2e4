"""benchmarks/startup_cost.py end to end in its quick mode: both modes run a real study
and the row is well formed. No speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "startup_cost.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
def test_quick_json_gives_a_well_formed_row() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    (row,) = out["rows"]
    assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}, row
    assert row["case"].startswith("study wall time, 4 simulations, 0.5 s start-up each")
    for key in ("ours", "baseline", "ratio"):
        assert isinstance(row[key], float | int) and math.isfinite(row[key]) and row[key] > 0
    assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.01)
    assert row["unit"] == "s" and row["target"] == 1.0
    # the launcher's split: start-up is part of the simulations' time (timed to within a
    # poll of the launcher's thread, which a loaded machine delays: no figure asserted)
    process = out["medians"]["process"]
    assert 0 < process["startup_seconds"] <= process["simulation_seconds"]
