"""`--seeds N` is a flag of every study example (`examples/study_common.py`'s
`StudyArgs`): "run the whole study this many times ... and report the spread". The
Navier-Stokes example ran the study once and ignored it; the C heat example (which has
no plot to turn off, as `run_seeds` asks of each run) refuses it, naming the way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import run_group

EXAMPLES = Path(__file__).parents[2] / "examples"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TINY_FLOW = [
    "--num_simulations", "2", "--time_steps", "2", "--grid_size", "16", "--modes", "4",
    "--width", "4", "--layers", "1", "--num_validation", "1", "--watermark", "2",
    "--batch_size", "2", "--eval_steps", "none", "--job_limit", "2",
    "--disable_progress_bar",
]  # fmt: skip


@pytest.mark.slow
def test_the_navier_stokes_example_runs_the_study_once_per_seed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "navier_stokes" / "train.py"), *TINY_FLOW,
           "--seed", "5", "--seeds", "2", "--json", "--output_dir", str(out)]  # fmt: skip
    proc = run_group(cmd, timeout=280, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])  # the last line: the report
    assert [run["seed"] for run in report["seeds"]] == [5, 6]
    for run in report["seeds"]:  # each seed's own study, in its own directory
        args = next((out / f"seed-{run['seed']}" / "checkpoints").glob(
            "checkpoint-*/training_args.json"))  # fmt: skip
        assert json.loads(args.read_text())["seed"] == run["seed"]
    assert "val_mse over 2 seeds (5..6)" in proc.stdout
    assert not (out / "checkpoints").exists()  # no run of its own beside the seeds'


def test_the_c_heat_example_refuses_seeds_before_anything_starts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "heat_c" / "train.py"), "--seeds", "2",
           "--output_dir", str(out)]  # fmt: skip
    proc = run_group(cmd, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "--seeds 2: this example runs one study; run it once per --seed" in proc.stderr
    assert not out.exists()  # nothing started
