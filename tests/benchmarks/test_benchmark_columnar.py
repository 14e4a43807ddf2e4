"""benchmarks/columnar.py --quick: it runs and gives its rows well formed. No speed is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "columnar.py"


@pytest.mark.timeout(180)
def test_quick_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert [r["target"] for r in rows] == [1.0, 1.0, None, None, 1.0]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["unit"] == "us"
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.02), r
