"""benchmarks/client_send.py end to end with tiny settings, against this checkout's own
HEAD as the base: every row is there and well formed, the ratio as the row's figures
say, and each arm imported the package it names (the benchmark checks it). No speed
is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "client_send.py"


@pytest.mark.timeout(180)
def test_tiny_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--json", "--rounds", "1", "--messages", "5",
               "--base", "HEAD"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        f"sender CPU per Client.send ({size} float32): ours vs HEAD" for size in ("1 KB", "1 MiB")
    ]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["unit"] == "us" and r["target"] is None, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01), r
