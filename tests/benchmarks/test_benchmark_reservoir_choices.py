"""benchmarks/reservoir_choices.py --quick: it runs and gives its rows well formed. No
speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "reservoir_choices.py"


@pytest.mark.timeout(180)
def test_quick_json_gives_every_row_well_formed() -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=160, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 2 and all("draw_choices=2, evict_choices=1" in r["case"] for r in rows)
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["unit"] == "us" and r["target"] == 0.97
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.02), r


def test_the_baseline_is_refused_as_ours() -> None:
    sys.path.insert(0, str(BENCHMARK.parent))
    import reservoir_choices

    with pytest.raises(SystemExit):
        reservoir_choices.main(["--choices", "1/1"])
