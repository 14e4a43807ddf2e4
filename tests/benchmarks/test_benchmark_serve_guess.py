"""benchmarks/serve_guess.py end to end with its quick settings (one A/B round of the
heat_guess study, 3 simulations of 12 steps): every row is there and well formed, the
ratios as the rows' figures say. No saving is asserted: the figures are for the docs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "serve_guess.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_quick_json_gives_every_row_well_formed() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    arms = ("residual check", "every guess taken")
    assert [r["case"] for r in rows] == [
        *(f"iterations/step, {part}: {arm} / never asking" for part in
          ("whole study", "first half") for arm in arms),
        *(f"iterations/step, steps answered by version 0: {arm} / never" for arm in arms),
    ]  # fmt: skip
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["unit"] == "iter/step" and r["target"] is None
    for r in rows[:4]:  # (the version 0 rows are null in a run that had no such step)
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=1e-6)
    # the baseline, never asking, is the same simulations' in both arms
    assert rows[0]["baseline"] == rows[1]["baseline"] and rows[2]["baseline"] == rows[3]["baseline"]
