"""benchmarks/reshard_buffers.py on a small checkpoint prints its row, well formed. No
speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "reshard_buffers.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_command_prints_its_row() -> None:
    argv = [sys.executable, str(SCRIPT), "--mb", "2", "--dim", "256", "--rounds", "1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=170, check=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    assert row["case"].endswith("2 -> 3 ranks (slowest rank)")
    assert row["ours_s"] > 0 and row["baseline_s"] > 0 and math.isfinite(row["ratio"])
    assert row["target"] == 1.5 and row["samples"] > 0
