"""benchmarks/wait_watch_cost.py --quick: both rows printed in the benchmarks' JSON
form, each operation timed (a positive figure) against a step timed in the same run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_json import json_rows  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]


def test_both_rows_are_measured_against_a_step() -> None:
    rows = json_rows("wait_watch_cost.py", "--quick")
    assert [row["case"] for row in rows] == ["arm_window", "pause_action"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["unit"] == "us" and row["ours"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.02)
