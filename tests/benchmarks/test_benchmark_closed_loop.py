"""benchmarks/closed_loop.py end to end with tiny settings (one A/B round of 120 steps;
one A/B round of the heat_guess study per solver, 4 simulations of 20 steps): every row
is there and well formed, the ratios as the rows' figures say. No speed and no saving is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "closed_loop.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_quick_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--steps", "120"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "steps/s serving 50 req/s / not serving",
        "request latency p50 (client) vs one step",
        "request latency p99 (client) vs one step",
        "request latency p50 in steps vs one step",
        "request latency p99 in steps vs one step",
        "jacobi solver work, 2nd half of the study, surrogate guess / previous state",
        "jacobi study: surrogate's final error, closed loop / not",
        "cg solver work, 2nd half of the study, surrogate guess / previous state",
        "cg study: surrogate's final error, closed loop / not",
    ]
    assert [r["unit"] for r in rows] == ["steps/s", "ms", "ms", "steps", "steps"] + [
        "A products/step",
        "relative L2",
    ] * 2
    assert rows[0]["target"] == 0.95
    assert [r["target"] for r in rows[5:]] == [1.3, None, None, None]
    for r in rows[5:]:
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=1e-6)
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
    assert rows[0]["ratio"] == pytest.approx(rows[0]["ours"] / rows[0]["baseline"], rel=1e-6)
    for r in rows[1:3]:
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=1e-6)
