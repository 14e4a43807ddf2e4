"""benchmarks/columnar.py, benchmarks/reservoir_choices.py and benchmarks/sample_reads.py
(the columnar reservoir's costs) --quick: they run and give their rows well formed. No
speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e  # starts a process

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _quick_rows(script: str) -> list[dict[str, Any]]:
    """The rows of `script --quick --json --rounds 1`, each checked well formed (in us)."""
    command = [sys.executable, str(BENCHMARKS / script), "--quick", "--json", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows: list[dict[str, Any]] = json.loads(done.stdout)["rows"]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["unit"] == "us"
    return rows


@pytest.mark.timeout(180)
def test_quick_json_gives_every_row_well_formed() -> None:
    rows = _quick_rows("columnar.py")
    assert [r["target"] for r in rows] == [1.0, 1.0, None, None, None, 1.0]


@pytest.mark.timeout(180)
def test_reservoir_choices_quick_json_gives_both_rows_well_formed() -> None:
    rows = _quick_rows("reservoir_choices.py")
    assert len(rows) == 2 and all("draw_choices=2, evict_choices=1" in r["case"] for r in rows)
    assert [r["target"] for r in rows] == [0.97, 0.97]


@pytest.mark.timeout(180)
def test_sample_reads_quick_json_gives_its_three_rows_well_formed() -> None:
    """(The script itself exits non-zero if the two reservoirs' batches differ.)"""
    rows = _quick_rows("sample_reads.py")
    assert len(rows) == 3 and [r["target"] for r in rows] == [None, None, None]
    assert "get_batch(64)" in rows[0]["case"] and "cold" in rows[2]["case"]
