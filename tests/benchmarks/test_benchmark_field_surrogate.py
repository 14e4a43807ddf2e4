"""benchmarks/field_surrogate.py in quick mode: both sides of each row train the
example's FNO and the rows come out well formed. No ratio is asserted:
the figures are for people to read (the machine's load moves them)."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "field_surrogate.py"


def load_benchmark() -> ModuleType:
    """benchmarks/field_surrogate.py as a module (it imports the example's modules as
    `navier_stokes.*`: nothing of another example's is shadowed or set aside)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module("field_surrogate")


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_quick_run_prints_both_rows() -> None:
    """Both rows, tiny: the hand loop and the trainer; the trainer fed by a client
    process over ZeroMQ (it must keep streaming through the timed steps: the benchmark
    raises if it exits early) and by an in-process source."""
    argv = [sys.executable, str(SCRIPT), "--quick", "--rounds", "2", "--steps", "5",
            "--ingest_steps", "3", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=230)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["rows"]
    assert [r["case"] for r in rows] == [  # --quick's sizes: 32^2 and 64^2
        "fno_trainer_vs_hand_loop_32", "fno_trainer_vs_hand_loop_32_cpu",
        "ingest_share_64", "ingest_share_64_cpu",
    ]  # fmt: skip
    assert [r["unit"] for r in rows] == ["steps/s", "steps/CPU-s"] * 2
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0
        assert math.isfinite(row["ratio"])
        assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=5e-3)
    assert [r["target"] for r in rows] == [0.97, 0.97, 0.93, 0.93]


def test_an_unknown_case_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        load_benchmark().main(["--cases", "hand,gpu"])
    assert info.value.code == 2
    assert "--cases hand,gpu: each case is hand or ingest" in capsys.readouterr().err


def test_the_benchmark_trains_the_examples_model_on_the_examples_mapping() -> None:
    """What both sides train: the example's FNO (its default size) on batches its
    `process_sample` makes from samples shaped like its stream."""
    bench = load_benchmark()
    samples = bench.make_samples(8, 16)
    inputs, target = bench.example_mapping()(samples[0])
    assert inputs.shape == (4, 16, 16) and target.shape == (1, 16, 16)
    model = bench.model(0, modes=4)
    assert type(model).__name__ == "FNO"
    assert model(inputs[None]).shape == (1, 1, 16, 16)


@pytest.mark.parametrize(
    ("flags", "names", "sizes"),
    [
        # the default's names, as other runs and the docs compare them
        ([], ["fno_trainer_vs_hand_loop", "ingest_share_256"], ["64^2", "256^2 fields"]),
        (["--quick"], ["fno_trainer_vs_hand_loop_32", "ingest_share_64"], ["32^2", "64^2 fields"]),
        (
            ["--grid", "128", "--ingest_grid", "128"],
            ["fno_trainer_vs_hand_loop_128", "ingest_share_128"],
            ["128^2", "128^2 fields"],
        ),
    ],  # fmt: skip
    ids=["default", "quick", "grids"],
)
def test_each_row_is_named_by_the_grid_it_measured(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    names: list[str],
    sizes: list[str],
) -> None:
    """A user trial read `ingest_share_256 ratio 0.273` from a `--quick --json` run that
    measured 64^2: a row whose grid is not the default's names it, and the JSON line
    keeps the title that states the sizes ("setup"). (The measurements are replaced: names only.)"""
    bench = load_benchmark()
    grids: list[int] = []

    def fake(rounds: int, steps: int, grid: int, *rate: float) -> tuple[float, ...]:
        grids.append(grid)
        return (2.0, 1.0, 4.0, 2.0)

    monkeypatch.setattr(bench, "measure", fake)
    monkeypatch.setattr(bench, "measure_ingest", fake)
    bench.main([*flags, "--json"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    hand, ingest = names
    assert [r["case"] for r in line["rows"]] == [hand, f"{hand}_cpu", ingest, f"{ingest}_cpu"]
    assert f"{hand}: {sizes[0]}, batch" in line["setup"]
    assert f"{ingest}: {sizes[1]} at" in line["setup"]
    assert "higher is better" in line["setup"]
    assert len(grids) == 2
