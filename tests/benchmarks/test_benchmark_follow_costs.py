"""benchmarks/follow_window.py and benchmarks/client_close_admission.py: each prints its
rows in the benchmarks' form, with strict JSON, and the ratio its figures give (the
window's is throughput, ours / baseline; the close's are times, baseline /
ours: higher is better in both)."""

from __future__ import annotations

import pytest
from benchmark_json import ROW_KEYS, json_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # each starts a process


def test_the_replay_window_rows_are_throughputs_ours_over_baseline() -> None:
    rows = json_rows("follow_window.py", "--rounds", "1")
    assert [r["case"].split(",")[1].strip() for r in rows] == ["1024 B field", "1048576 B field"]
    for r in rows:
        assert set(r) == ROW_KEYS and r["unit"] == "steps/s" and r["target"] is None, r
        assert r["ours"] > 0 and r["baseline"] > 0, r
        assert r["ratio"] == pytest.approx(r["ours"] / r["baseline"], rel=0.01), r


def test_the_close_rows_are_times_baseline_over_ours() -> None:
    rows = json_rows("client_close_admission.py", "--rounds", "2", "--steps", "2")
    assert len(rows) == 4 and "launched" in rows[2]["case"], rows
    assert "worker mode" in rows[3]["case"], rows
    for row in rows:
        assert set(row) == ROW_KEYS and row["unit"] == "ms" and row["target"] is None, row
        assert row["ours"] > 0 and row["baseline"] > 0, row
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.01), row
