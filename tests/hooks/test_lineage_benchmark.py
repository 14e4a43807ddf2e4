"""benchmarks/lineage_cost.py --quick runs and prints well-formed rows (the figures are
timings: not asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from benchmark_json import assert_rows_well_formed, json_rows  # noqa: E402

pytestmark = pytest.mark.e2e  # it starts a process and trains


@pytest.mark.timeout(300)
def test_lineage_cost_quick_rows() -> None:
    rows = json_rows("lineage_cost.py", "--quick", "--rounds", "1", timeout=280)
    assert [r["case"] for r in rows] == [
        "trainer_b16", "hook_b16_block", "hook_b16_samples",
        "trainer_b256", "hook_b256_block", "hook_b256_samples",
    ]  # fmt: skip
    assert_rows_well_formed(rows, "us/step")
