"""benchmarks/store_traffic.py: its rows in the benchmarks' JSON form, the looks' rate
reached (counted by the loaders, against the rate `ROLL_LOOK` gives), and the host's
CPU read from /proc (the benchmark's own probe, 200 requests a second, is seen)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_json import BENCHMARKS, ROW_KEYS, benchmark_module  # noqa: E402

from melissa_trainer.core.roll_call import ROLL_LOOK

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)"),
]


def test_rows_and_the_rate_of_looks() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "store_traffic.py"), "--ranks", "4", "40",
         "--rounds", "2", "--seconds", "0.5", "--json"],
        capture_output=True, text=True, timeout=200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows = out["rows"]
    assert [r["case"] for r in rows] == [
        "check_latency_4_held", "store_cpu_4_held", "check_latency_40_held", "store_cpu_40_held",
    ]  # fmt: skip
    for r in rows:
        assert set(r) == ROW_KEYS, r
        assert r["ours"] >= 0 and r["baseline"] > 0 and r["ratio"] > 0, r
    for n in (4, 40):
        # (each of n clients looks once per ROLL_LOOK s: paced, so neither far short of
        # it nor beyond it)
        assert out["wanted"][str(n)] == pytest.approx(n / ROLL_LOOK)
        assert 0.7 * n / ROLL_LOOK <= out["rates"][str(n)] <= 1.1 * n / ROLL_LOOK, out


def test_the_cpu_row_of_an_idle_host_is_its_resolution() -> None:
    """A host that used no clock tick in a window: its headroom is one tick's, not a
    division by zero."""
    bench = benchmark_module("store_traffic")
    result = {"ranks": 8, "idle_us": 30.0, "held_us": 60.0, "idle_cpu": 0.0, "held_cpu": 0.0}
    rows = bench.rows_of([result], 2.0)
    assert rows[0]["ratio"] == pytest.approx(0.5)
    tick = 100.0 / (bench.os.sysconf("SC_CLK_TCK") * 2.0)
    assert rows[1]["ours"] == 0.0 and rows[1]["ratio"] == pytest.approx(100.0 / tick)
