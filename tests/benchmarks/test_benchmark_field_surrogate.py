"""benchmarks/field_surrogate.py in quick mode: both sides (OnlineTrainer and the hand
loop) train the example's FNO and the row comes out well formed. No ratio is asserted:
the figures are for people to read (the machine's load moves them)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "field_surrogate.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_quick_run_prints_the_fno_row() -> None:
    argv = [sys.executable, str(SCRIPT), "--quick", "--rounds", "2", "--steps", "5", "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=170, check=True).stdout
    (row,) = json.loads(out.strip().splitlines()[-1])["rows"]
    assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
    assert row["case"] == "fno_trainer_vs_hand_loop" and row["unit"] == "steps/s"
    assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
    assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"], rel=5e-3)
    assert row["target"] == 0.97


def test_the_benchmark_trains_the_examples_model_on_the_examples_mapping() -> None:
    """What both sides train: the example's FNO (its default size) on batches its
    `process_sample` makes from samples shaped like its stream."""
    path = list(sys.path)
    own = {m: sys.modules.pop(m, None) for m in ("solver", "models")}  # other examples'
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import field_surrogate as bench
    finally:  # the benchmark puts the example's folder on the path: restored
        sys.path[:] = path
        for m, previous in own.items():
            sys.modules.pop(m, None)
            if previous is not None:
                sys.modules[m] = previous
    samples = bench.make_samples(8, 16)
    inputs, target = bench.example_mapping()(samples[0])
    assert inputs.shape == (4, 16, 16) and target.shape == (1, 16, 16)
    model = bench.model(0, modes=4)
    assert type(model).__name__ == "FNO"
    assert model(inputs[None]).shape == (1, 1, 16, 16)
