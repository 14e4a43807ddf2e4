"""benchmarks/heat_worker.py end to end in its quick mode: both modes run the heat
example's real solver under a launcher, every (simulation, step) received once (the
benchmark checks it), and the row is well formed. No speed is asserted: the figures are
for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "heat_worker.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
def test_quick_json_gives_a_well_formed_row() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    (row,) = out["rows"]
    assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}, row
    assert row["case"].startswith("heat example study wall, 4 simulations of 32x32, 100 steps")
    for key in ("ours", "baseline", "ratio"):
        assert isinstance(row[key], float | int) and math.isfinite(row[key]) and row[key] > 0
    assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.01)
    assert row["unit"] == "s" and row["target"] == 1.0
    assert set(out["runs"]) == {"worker", "process"} and out["load"]["cores"] >= 1
