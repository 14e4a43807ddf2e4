"""benchmarks/launch_cost.py end to end with tiny settings (one short round per mode, a
few launches, a small buffer): every row is there and well formed. No speed is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "launch_cost.py"
TARGETS = {
    "trainer steps/s while the launcher starts 10 short simulations per second / steps/s "
    "with no launches": 0.95,
    "launch latency (call to first line of the simulation), posix_spawn from a small "
    "process / ours": 0.8,
}


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="the benchmark measures Linux's launch path")
def test_quick_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--rounds", "1",
               "--seconds", "0.5", "--launches", "3", "--buffer-mb", "10"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    rows = out["rows"]
    assert [r["case"] for r in rows] == [
        *list(TARGETS)[:1],
        "the same, fork path (main's preexec_fn)",
        list(TARGETS)[1],
        "the same, fork path (main's preexec_fn)",
        "the same, /bin/echo",
        "the launch call in the trainer, fork path / ours",
    ]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["target"] == TARGETS.get(r["case"]), r
        higher_is_better = r["unit"] == "steps/s"  # else a time: lower is better
        expected = r["ours"] / r["baseline"] if higher_is_better else r["baseline"] / r["ours"]
        assert r["ratio"] == pytest.approx(expected, rel=0.01, abs=0.002), r
    assert {r["unit"] for r in rows} == {"steps/s", "ms"}
    setup = out["setup"]
    assert setup["launches_per_round"]["launches"] >= 1 and setup["trainer_rss_mb"] > 0
