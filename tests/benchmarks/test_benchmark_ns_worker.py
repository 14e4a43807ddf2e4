"""benchmarks/ns_worker.py end to end in its quick mode: the Navier-Stokes example's
real solver under a launcher in both modes, every (simulation, step) received once (the
benchmark checks it), its start-up and simulation timed, and the rows well formed. No
speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "ns_worker.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
def test_quick_json_gives_well_formed_rows() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    per_simulation, study = out["rows"]
    for row in (per_simulation, study):
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}, row
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(row[key], float | int) and math.isfinite(row[key]) and row[key] > 0
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.02)
        assert row["unit"] == "s"
    assert per_simulation["case"].startswith("Navier-Stokes solver, 16x16, 10 fields, 50 steps")
    assert per_simulation["target"] is None  # (which dominates: no better or worse)
    assert study["case"].startswith("Navier-Stokes study wall, 4 simulations of 16x16")
    assert study["target"] == 1.0
    assert len(out["pairs"]["startup"]) == len(out["pairs"]["simulation"]) == 2
    assert set(out["runs"]) == {"worker", "process"} and out["load"]["cores"] >= 1
