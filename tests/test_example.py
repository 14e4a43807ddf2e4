"""The examples' command lines (what --help shows is what they run with), and the
oscillator example (an in-process source) end to end, in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"
EXAMPLE = EXAMPLES / "oscillators" / "train.py"
#: one torch thread, as every other test's trainer runs: on 2 busy cores, two threads for
#: this small MLP make the oscillator run 1.5x (idle) to 4x (loaded) slower, same result
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_example(path: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(path), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd, env=ENV)


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("example", "shown"),
    [
        ("heat_pde", {"buffer": "reservoir", "buffer_size": "4000", "watermark": "500",
                      "sample_to_insert_ratio": "8.0", "batch_size": "32",
                      "output_dir": "outputs/heat_pde"}),
        ("lorenz", {"buffer": "reservoir", "buffer_size": "20000", "watermark": "2000",
                    "sample_to_insert_ratio": "4.0", "batch_size": "128"}),
        ("oscillators", {"buffer": "firo", "buffer_size": "2048", "watermark": "512",
                         "batch_size": "64"}),
    ],
)  # fmt: skip
def test_help_shows_the_defaults_the_example_runs_with(
    example: str, shown: dict[str, str], tmp_path: Path
) -> None:
    path = EXAMPLES / example / "train.py"
    proc = run_example(path, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(proc.stdout.split())  # argparse wraps lines
    for name, value in shown.items():
        flag_help = text.split(f"--{name} ")[2].split(" --")[0]  # [1] is the usage line
        assert f"(default: {value})" in flag_help, (name, flag_help)
    # a bad value is argparse's error naming the flag, before anything starts
    proc = run_example(path, "--watermark", "10", "--buffer_size", "5", "--batch_size", "2",
                       cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: argument --watermark: watermark=10 is larger than buffer_size=5" in proc.stderr
    assert not (tmp_path / "outputs").exists()


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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 400  # 256 simulations x 100 steps / batch 64
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-400").is_dir()
    assert list((tmp_path / "out" / "runs").glob("events.out.tfevents.*"))
