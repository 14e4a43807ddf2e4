"""benchmarks/online_vs_offline_ns.py (reached through ``online_vs_offline.py --example
navier_stokes``) in quick mode: both arms run on the Navier–Stokes example (online: its
train.py streaming; offline: the solver's .npy files, then epochs), with the same data
budget, and the rows come out well formed. No ratio is asserted: the figures are for
people to read (the machine's load moves them)."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import processes_with

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "online_vs_offline.py"
#: the quick mode's study: 6 simulations of 4 fields of 16^2
N, STEPS, GRID = 6, 4, 16
#: the decimals the benchmark rounds a row's figures (ours, baseline) and ratio to
FIGURE_DECIMALS, RATIO_DECIMALS = 5, 3


def load_benchmark(module: str = "online_vs_offline_ns"):
    """The benchmark's `module` (benchmarks/ is not a package: by name)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(module)


def ratio_within_rounding(row: dict) -> bool:
    """Whether `row`'s ratio is its baseline / ours as far as the rounding of all three
    allows: the figures each up to half a unit of their last decimal off, the ratio too.
    A relative tolerance cannot say it: 0.0244 rounded to 0.024 is 1.6% off."""
    fig, rat = 0.5 * 10.0**-FIGURE_DECIMALS, 0.5 * 10.0**-RATIO_DECIMALS
    ours, baseline, ratio = row["ours"], row["baseline"], row["ratio"]
    low = (baseline - fig) / (ours + fig) - rat
    high = (baseline + fig) / (ours - fig) + rat if ours > fig else math.inf
    slack = 1e-12 * max(1.0, abs(ratio))  # (the float arithmetic of the bounds)
    return low - slack <= ratio <= high + slack


def records(online_mse: float, offline_mse: float) -> tuple[list[dict], list[dict]]:
    """One round's online and offline records, as `rows` reads them."""
    online = {"val_mse": online_mse, "process_wall": 10.0, "process_cpu": 20.0}
    offline = {"equal_data": {"val_mse": offline_mse}, "process_wall": 0.3,
               "process_cpu": 0.9, "splits": {"0.5": {"val_mse": offline_mse}},
               "storage": {"val_mse": offline_mse}}  # fmt: skip
    return [online], [offline]


def test_the_ratio_check_allows_the_rounding_and_no_more() -> None:
    """The benchmark's own rows, of ratios below 0.1 (0.3 / 10 and 0.01 / 0.41 =
    0.0244, which it rounds to 0.024): each within its rounding, where the former check
    (rel=5e-3) refused them; a ratio off by more than its rounding is refused."""
    opts = argparse.Namespace(simulations=N, storage_fraction=0.34)
    table = load_benchmark("online_vs_offline_ns_report").rows(*records(0.41, 0.01), opts)
    small = [row for row in table if row["ratio"] < 0.1]
    assert {row["ratio"] for row in small} == {0.03, 0.024, 0.045}  # all five rows
    assert len(small) == 5
    for row in small:
        assert ratio_within_rounding(row)
    # the former check fails the one rounding moved by more than 0.5%
    former = [row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=5e-3)
              for row in small]  # fmt: skip
    assert not all(former)
    # wrong ratios: a unit in the third decimal off, or inverted
    for row in small:
        for wrong in (row["ratio"] + 0.001, row["ratio"] - 0.001, row["ours"] / row["baseline"]):
            assert not ratio_within_rounding({**row, "ratio": round(wrong, RATIO_DECIMALS)})
    # large ratios: 0.41 / 0.013 = 31.538, which the rounding of 0.013 to 5 decimals
    # (up to 5e-6: 4e-4 of it) leaves known to within 0.013
    (row, *_) = load_benchmark("online_vs_offline_ns_report").rows(*records(0.013, 0.41), opts)
    assert row["ratio"] == 31.538 and ratio_within_rounding(row)
    assert ratio_within_rounding({**row, "ratio": 31.55})
    assert not ratio_within_rounding({**row, "ratio": 31.56})
    assert not ratio_within_rounding({**row, "ratio": 31.52})


@pytest.mark.e2e  # starts interpreters
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_quick_run_compares_both_arms_on_the_same_data(tmp_path: Path) -> None:
    argv = [sys.executable, str(SCRIPT), "--example", "navier_stokes", "--quick", "--json",
            "--output_dir", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # interleaved: each round's online arm, then its offline arm
    arms = [line.split()[2] for line in lines if line.startswith("round ")]
    assert arms == ["online", "offline"]
    rows = json.loads(lines[-1])["rows"]
    assert [r["case"].split(":")[0] for r in rows] == [
        f"NS equal data ({N} simulations, online's steps)", "NS equal data", "NS equal data",
        "NS equal wall time", "NS equal storage (0.34 of the data set)",
    ]  # fmt: skip
    assert [r["unit"] for r in rows] == ["mse", "s", "CPU-s", "mse", "mse"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and row["target"] is None
        assert math.isfinite(row["ratio"])
        assert ratio_within_rounding(row), row
    assert "ICML 2023 FNO: 1.16" in rows[0]["case"]

    results = json.loads((tmp_path / "results.json").read_text())
    (online,), (offline,) = results["online"], results["offline"]
    # the same data budget: every (simulation, step) streamed once; offline wrote each
    # simulation's fields to disk (the initial field and STEPS fields of GRID^2 float32
    # a .npy, 128 bytes of header) and trained on them for exactly online's steps
    assert online["samples_received"] == N * STEPS and online["study"]["finished"] == N
    assert offline["equal_data"]["simulations"] == N
    assert offline["equal_data"]["steps"] == online["steps"] > 0
    assert offline["bytes_on_disk"] > N * (128 + (STEPS + 1) * GRID * GRID * 4)
    # equal storage: 0.34 of the data set holds 2 of the 6 simulations
    assert offline["storage"]["simulations"] == 2
    assert offline["storage"]["bytes_on_disk"] <= 0.34 * offline["bytes_on_disk"]
    for run in [offline["equal_data"], offline["storage"], *offline["splits"].values()]:
        assert 0 < run["val_mse"] < math.inf
    # the same validation set: both arms' errors are of the example's held-out set,
    # whose baselines online printed
    assert f"mean field {online['mean_field_mse']:.4g}" in proc.stdout
    assert not list(tmp_path.glob("work-*"))  # removed after a successful run
    assert processes_with(str(tmp_path)) == []  # no solver outlived its arm


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds 0 must be >= 1"),
        (["--simulations", "0"], "--simulations 0 must be >= 1"),
        (["--splits", "0.5,1"], "--splits 0.5,1: each share must be in (0, 1)"),
        (["--splits", "half"], "--splits half: each share must be in (0, 1)"),
        (["--storage_fraction", "0"], "--storage_fraction 0.0 must be in (0, 1]"),
        (["--ratio", "-1"], "--ratio -1.0 must be >= 0"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        load_benchmark().main([*argv, "--output_dir", str(tmp_path / "out")])
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
