"""benchmarks/connection_memory.py: its rows from arms' samples the test writes (growth
per closed connection over each half, what malloc_trim gave back), and the script end
to end with tiny settings: every row there and well formed. No size is asserted of a
real run: the figures are for people to read."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest
from benchmark_json import BENCHMARKS, ROW_KEYS, benchmark_module

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def _run(kb_per_sim_late: float, trimmed: int) -> dict[str, Any]:
    """An arm's result over 800 simulations: 10 KB each over the first 400, then
    `kb_per_sim_late` each, `trimmed` KB given back by malloc_trim in 2 ms."""
    samples = [(n, 40_000 + 10 * n) for n in range(100, 500, 100)]
    samples += [(n, 44_000 + int(kb_per_sim_late * (n - 400))) for n in range(500, 900, 100)]
    last = samples[-1][1]
    return {"samples": samples, "before_trim": last, "after_trim": last - trimmed,
            "trim_s": 0.002}  # fmt: skip


@pytest.mark.timeout(30)
def test_rows_give_each_half_per_connection_and_the_trim_medians_of_rounds() -> None:
    """Ours grows 2 KB per simulation in its second half (a leak's pattern), raw 0.5 KB
    (its median over three rounds: 0, 0.5 and 4); the first half is 10 KB each for
    both (400 -> 800 and 100 -> 400: the half's first and last samples)."""
    cm = benchmark_module("connection_memory")
    runs = {"ours": [_run(2.0, 5000)], "raw": [_run(0.0, 100), _run(0.5, 300), _run(4.0, 200)]}
    rows = {r["case"]: r for r in cm.rows_of(runs, 800)}
    late = rows["RSS growth per closed connection, 400-800"]
    # (ours: from its sample at 400, 44,000 KB, to 800: 44,800 KB over 400 simulations)
    assert late["ours"] == pytest.approx(2.0) and late["baseline"] == pytest.approx(0.5)
    assert late["ratio"] == pytest.approx(0.25) and late["unit"] == "KB"
    early = rows["RSS growth per closed connection, 0-400 (warm-up)"]
    assert early["ours"] == pytest.approx(10.0) == early["baseline"]
    trim = rows["RSS given back by malloc_trim(0) after 800"]
    assert (trim["ours"], trim["baseline"]) == (5000, 200)
    assert rows["malloc_trim(0) call"]["ours"] == pytest.approx(2.0)
    # a growth of 0 or less has no ratio (the row says None, printed "-")
    flat = cm.rows_of({"ours": [_run(0.0, 1)], "raw": [_run(0.0, 1)]}, 800)[0]
    assert flat["ours"] == 0 and flat["ratio"] is None


@pytest.mark.e2e  # starts processes
@pytest.mark.timeout(180)
def test_tiny_run_gives_every_row_well_formed() -> None:
    """200 simulations per arm, sampled every 50, one round."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "connection_memory.py"), "--json",
         "--sims", "200", "--every", "50", "--rounds", "1"],
        capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "RSS growth per closed connection, 100-200",
        "RSS growth per closed connection, 0-100 (warm-up)",
        "RSS given back by malloc_trim(0) after 200",
        "malloc_trim(0) call",
    ]
    for r in rows:
        assert set(r) == ROW_KEYS and r["target"] is None, r
        assert all(math.isfinite(r[k]) for k in ("ours", "baseline")), r
        if r["ratio"] is not None:
            assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01, abs=0.002)
    assert [r["unit"] for r in rows] == ["KB", "KB", "KB", "ms"]
