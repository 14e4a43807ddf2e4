"""benchmarks/defaults.py in quick mode: both arms (the library's defaults, the previous
ones) run their study and the rows come out well formed. No error is asserted: the
figures are for people to read (docs/measured.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "defaults.py"


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_both_arms_run_and_the_rows_are_well_formed() -> None:
    argv = [sys.executable, str(SCRIPT), "--quick", "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=140, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "improvement over the mean field, library defaults",
        "improvement over the mean field, previous defaults",
        "val MSE: previous / library defaults",
        "wall time per run: previous / library defaults",
    ]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        # every ratio is oriented so that higher is better for the library's defaults
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=2e-3, abs=1e-3)
    assert [r["target"] for r in rows] == [10.0, None, None, None]
    # one validation set: the mean field's error is the same baseline in both rows
    assert rows[0]["baseline"] == rows[1]["baseline"]
    assert rows[2]["ours"] == rows[0]["ours"] and rows[2]["baseline"] == rows[1]["ours"]
