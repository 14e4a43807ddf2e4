"""The Navier–Stokes example's log, redirected to a file, holds its lines and no
progress bar (a user trial, htrial13: ``train.py > run.log 2>&1`` held the bar's
redraws, one a step, each behind a carriage return: hundreds of lines in a pager or an
editor, where ``wc -l`` counted a few dozen). The bar is drawn only where standard
error is a terminal: tests/hooks/test_progress_bar_terminal.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--num_simulations", "6", "--time_steps", "10", "--grid_size", "16", "--modes", "4",
    "--width", "8", "--layers", "2", "--dt", "0.05", "--num_validation", "1",
    "--buffer_size", "60", "--watermark", "16", "--batch_size", "8", "--eval_steps", "none",
    "--logging_steps", "100", "--job_limit", "2", "--no_plot", "--json",
]  # fmt: skip


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_redirected_run_s_log_holds_no_progress_bar(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with log.open("w") as sink:  # ``> run.log 2>&1``
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "navier_stokes" / "train.py"), *TINY,
             "--output_dir", str(tmp_path / "out")],
            stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=280, check=False,
        )  # fmt: skip
    text = log.read_bytes().decode()  # (read_text would turn each carriage return into a \n)
    assert done.returncode == 0, text[-3000:]
    summary = json.loads(text.splitlines()[-1])
    assert summary["steps"] > 20, summary  # enough steps for a bar to have flooded the log
    assert "\r" not in text, text[:3000]
    # every line is one the run printed: as many as ``wc -l`` counts, a few per log
    lines = text.splitlines()
    assert len(lines) == text.count("\n") and len(lines) < summary["steps"], text[-3000:]
    assert not any(line.startswith("training:") for line in lines)
