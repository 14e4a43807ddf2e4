"""benchmarks/active_sampling.py in quick mode: both samplers run their whole budget
(every simulation finished, the same steps), Breed is fed losses, and the rows and the
plot come out well formed. No error is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "active_sampling.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_both_samplers_run_their_budget_and_the_rows_are_well_formed(tmp_path: Path) -> None:
    png = tmp_path / "where.png"
    argv = [sys.executable, str(SCRIPT), "--quick", "--json", "--plot", str(png),
            "--output_dir", str(tmp_path)]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=110, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["case"].split(":")[0] for r in rows] == [
        "val MSE, uniform test set",
        "val MSE, hard-region test set",
        "share of simulations in the hard region",
    ]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
    uniform, hard, share = rows
    for row in (uniform, hard):  # LHS / Breed: higher is better for Breed
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=1e-3)
    assert uniform["target"] == 1.2 and hard["target"] == uniform["ratio"]
    assert share["ratio"] == pytest.approx(share["ours"] / share["baseline"], rel=1e-3)

    results = json.loads((tmp_path / "results.json").read_text())
    setup, runs = results["setup"], results["runs"]
    assert sorted(r["sampler"] for r in runs) == ["breed", "lhs"]
    for run in runs:
        assert run["simulations"] == setup["simulations"] == len(run["parameters"])
        assert run["steps"] == setup["steps"]
        hard_share = sum(p["log2_alpha"] >= 0 for p in run["parameters"]) / len(run["parameters"])
        assert run["hard_share"] == pytest.approx(hard_share, abs=1e-4)
    breed = next(r for r in runs if r["sampler"] == "breed")
    assert breed["reductions"] > 0 and breed["observed"] > 0  # the trainer fed the sampler
    assert png.stat().st_size > 10_000
