"""The oscillator example (an in-process source), end to end, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[1] / "examples" / "oscillators" / "train.py"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_oscillator_example_beats_the_mean_field(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(EXAMPLE),
        "--json",
        "--num_simulations",
        "256",
        "--output_dir",
        str(tmp_path / "out"),
        "--disable_progress_bar",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 400  # 256 simulations x 100 steps / batch 64
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-400").is_dir()
    assert list((tmp_path / "out" / "runs").glob("events.out.tfevents.*"))
