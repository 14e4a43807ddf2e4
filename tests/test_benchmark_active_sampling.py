"""benchmarks/active_sampling.py in quick mode: the three arms (LHS, Breed's exploration
alone, Breed) run their whole budget in turn (every simulation finished, the same
steps), the Breed arms are fed losses, the control draws no bred point, and the rows and
the plot come out well formed. No error is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "active_sampling.py"


@pytest.mark.slow
@pytest.mark.timeout(240)  # a hang guard: ~60 s alone, >110 s beside other xdist workers
def test_the_three_arms_run_their_budget_and_the_rows_are_well_formed(tmp_path: Path) -> None:
    png = tmp_path / "where.png"
    argv = [sys.executable, str(SCRIPT), "--quick", "--json", "--plot", str(png),
            "--output_dir", str(tmp_path)]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=220, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [
        "val MSE, uniform test set: LHS / Breed",
        "val MSE, hard-region test set: LHS / Breed",
        "share of simulations in the hard region",
        "val MSE, uniform test set: exploration alone / Breed",
        "val MSE, hard-region test set: exploration alone / Breed",
    ]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
    uniform, hard, share, *control = rows
    for row in (uniform, hard, *control):  # baseline / Breed: higher is better for Breed
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=1e-3)
    assert uniform["target"] == 1.2 and hard["target"] == uniform["ratio"]
    assert share["ratio"] == pytest.approx(share["ours"] / share["baseline"], rel=1e-3)
    assert [row["target"] for row in control] == [None, None]
    # the same Breed median against both baselines
    assert [row["ours"] for row in control] == [uniform["ours"], hard["ours"]]

    results = json.loads((tmp_path / "results.json").read_text())
    setup, runs = results["setup"], results["runs"]
    assert [r["sampler"] for r in runs] == ["lhs", "explore", "breed"]  # interleaved
    for run in runs:
        assert run["simulations"] == setup["simulations"] == len(run["parameters"])
        assert run["steps"] == setup["steps"]
        hard_share = sum(p["log2_alpha"] >= 0 for p in run["parameters"]) / len(run["parameters"])
        assert run["hard_share"] == pytest.approx(hard_share, abs=1e-4)
    _, explore, breed = runs
    for run in (explore, breed):  # the trainer fed the sampler
        assert run["reductions"] > 0 and run["observed"] > 0
    assert explore["explored"] == explore["simulations"]  # no bred draw
    assert png.stat().st_size > 10_000
