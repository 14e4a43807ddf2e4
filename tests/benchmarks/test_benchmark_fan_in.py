"""benchmarks/fan_in.py end to end with tiny settings (N = 1 and 4, one short round, 100
idle simulations): every row is there and well formed. No speed or size is asserted:
the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "fan_in.py"
CPU_CASES = {
    f"{size} fields, N=4 clients: receiver CPU per {what}"
    for size in ("1 KB", "1 MB")
    for what in ("sample", "MB", "sample, middle half")
} | {"1 KB fields, N=4 clients, client batching on: receiver CPU per sample"}
MEMORY_CASES = {
    "receiver RSS with 100 connected idle simulations",
    "receiver RSS per connected idle simulation",
}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_quick_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--clients", "1,4",
               "--rounds", "1", "--seconds", "0.3", "--idle", "100", "--settle", "0.1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert {r["case"] for r in rows} == CPU_CASES | MEMORY_CASES
    assert len(rows) == len(CPU_CASES | MEMORY_CASES)
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        # higher is better: lower cost (or memory) than the baseline gives a ratio > 1
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01, abs=0.002), r
        per_sample = r["case"].endswith("CPU per sample") and "batching" not in r["case"]
        assert r["target"] == (0.83 if per_sample else None), r
        assert r["unit"] in {"µs", "µs/MB", "MB", "KB"}, r
