"""benchmarks/study_scale.py in quick mode gives every row, well formed, and its baseline
(the receiver with its archive off) is the larger record it should be. No speed is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "study_scale.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_command_prints_its_rows() -> None:
    argv = [sys.executable, str(SCRIPT), "--quick", "--json", "--rounds", "1", "--steps", "20"]
    out = subprocess.run(
        [*argv, "--buffer-mb", "4"], capture_output=True, text=True, timeout=170, check=True
    ).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert len(rows) == 10
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"])
    size = next(r for r in rows if r["case"].startswith("receiver record size"))
    assert size["ours"] < size["baseline"] / 2  # archived: far smaller than every ledger
    growth = [r for r in rows if r["target"] is not None]
    assert len(growth) == 3 and all(r["target"] == 0.83 for r in growth)
