"""The heat example in worker mode with an adaptive sampler (``--worker --sampler
density``): each worker's request draws its simulation then, from the losses the trainer
has observed so far, and the end-of-run account says how many draws adapted.

Why the draws can adapt at this tiny size on a loaded machine: a FIFO buffer of 16
samples blocks the receiver when full (back-pressure), and the launcher answers a
request only while at most `job_limit` ended simulations await their data, so a worker
cannot run the study far ahead of training; the losses are reduced at every step
(``--simulation_loss_steps 1``). Then the last draws are made holding the losses of
most earlier simulations, more than the sampler's `min_observations` (8).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import processes_with

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"
SIMULATIONS, STEPS, MIN_OBSERVATIONS = 24, 10, 8
FLAGS = [
    "--worker", "--sampler", "density", "--simulation_loss_steps", "1",
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", "4", "--eval_steps", "none",
    "--logging_steps", "100", "--disable_progress_bar", "--json",
]  # fmt: skip


@pytest.mark.timeout(180)
def test_a_worker_study_with_the_density_sampler_adapts_its_draws(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *FLAGS, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=160, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
    study = summary["study"]
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert summary["samples_received"] == SIMULATIONS * STEPS  # each (simulation, step) once
    drawn = summary["sampler"]
    assert drawn["draws"] == SIMULATIONS and drawn["observed"] == SIMULATIONS, drawn
    assert drawn["observed_at_last_draw"] >= MIN_OBSERVATIONS, drawn
    adapted = drawn["draws"] - drawn["explored"]
    assert adapted > 0, drawn
    # the study's account says as much, in the sampler's own terms (said once)
    said = proc.stdout + proc.stderr
    (line,) = [x for x in said.splitlines() if "adaptive sampler: of " in x]
    found = re.search(r"(\d+) before min_observations=8 losses were kept, (\d+) with the", line)
    assert found is not None, line
    assert (int(found[1]), int(found[2])) == (drawn["explored"], adapted), line
    logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs
    assert processes_with(str(out / "rendezvous")) == []
