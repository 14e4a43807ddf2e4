"""benchmarks/ingest_features.py --quick: it runs both arms (features at ingest, per
draw) and gives its rows well formed. No speed is asserted: the figures are for people
to read (docs/concepts/buffers.md, "Features at ingest")."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # starts a process

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "ingest_features.py"


@pytest.mark.timeout(180)
def test_quick_json_gives_both_rows_well_formed() -> None:
    command = [sys.executable, str(SCRIPT), "--quick", "--json", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 2
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}, row
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(row[key], float | int) and math.isfinite(row[key]) and row[key] > 0
        assert row["unit"] == "us" and row["target"] == 1.0
        assert math.isclose(row["ratio"], row["baseline"] / row["ours"], rel_tol=0.01)
    assert "hidden 256" in rows[0]["case"] and "tiny MLP" in rows[1]["case"]
