"""benchmarks/client_finite_check.py end to end with tiny settings: every row is there
and well formed, the ratio as the row's figures say. No speed is asserted: the figures
are for people to read (docs/measured.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "client_finite_check.py"
CASES = [
    "sender CPU per send (0.25 MiB float32): check / no check",
    "all_finite alone (0.25 MiB float32)",
]


@pytest.mark.timeout(120)
def test_tiny_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--json", "--rounds", "1", "--messages", "5",
               "--bytes", str(1 << 18)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == CASES
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["unit"] == "us" and r["target"] is None, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01), r
