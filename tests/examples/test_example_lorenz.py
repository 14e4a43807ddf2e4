"""The Lorenz example, end to end in subprocesses, tiny: with the launcher starting the
solvers, and in external mode with the solvers started here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from process_tree import processes_with

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]

EXAMPLES = Path(__file__).parents[2] / "examples" / "lorenz"
SIMULATIONS, STEPS = 6, 200
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--horizon", "20",
    "--num_validation", "8", "--hidden", "64", "--buffer_size", "1200", "--watermark", "200",
    "--batch_size", "64", "--sample_to_insert_ratio", "16", "--eval_steps", "none",
    "--logging_steps", "100", "--disable_progress_bar", "--json",
]  # fmt: skip
KEYS = {"horizon", "rollout_mse", "persistence_mse", "one_step_val_loss",
        "one_step_val_loss_p99", "one_step_val_loss_max", "wall_seconds",
        "simulation_seconds", "training_seconds", "sequential_seconds", "samples_seen",
        "samples_received", "steps", "study", "plot"}  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def summary_of(returncode: int, stdout: str, stderr: str) -> dict:
    assert returncode == 0, stdout[-3000:] + stderr[-3000:]
    summary = json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])
    assert set(summary) >= KEYS
    assert summary["horizon"] == 20
    assert summary["samples_received"] == SIMULATIONS * STEPS  # each transition once
    assert summary["samples_seen"] >= summary["samples_received"]
    # A 20-step rollout of a chaotic system has a heavy tail: 0.07-0.34 of persistence's
    # error in 56 runs of this configuration with 2 validation trajectories, once 0.535
    # in a full CI run and once 0.83 (worker mode, a worker killed, load 12: 2026-12-03;
    # online training sees the stream in the order it arrives). Over 8 trajectories the
    # mean is steadier: 0.09-0.14 against 0.17-0.23 with 2, three runs each alternated,
    # quiet machine, 2026-12-03. The bar: clearly beat it.
    assert summary["rollout_mse"] < 0.75 * summary["persistence_mse"], summary
    return summary


@pytest.mark.timeout(120)
def test_lorenz_example_beats_persistence_with_launched_solvers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "train.py"), *TINY, "--output_dir", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100, cwd=tmp_path, env=ENV)
    summary = summary_of(proc.returncode, proc.stdout, proc.stderr)
    study = summary["study"]
    assert study["failed"] == study["restarts"] == study["redraws"] == 0
    # the stream ended: the source let the simulations exit before stopping the launcher
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert summary["simulation_seconds"] > 0 and summary["training_seconds"] > 0
    assert "overlap:" in proc.stdout and "rollout MSE" in proc.stdout
    assert (out / "lorenz_rollouts.png").stat().st_size > 10_000
    assert list((out / "runs").glob("events.out.tfevents.*"))
    assert processes_with(str(out / "rendezvous")) == []


@pytest.mark.timeout(120)
def test_lorenz_example_in_external_mode_trains_on_solvers_started_by_hand(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "train.py"), *TINY, "--no_plot", "--external"]
    trainer = subprocess.Popen(
        [*cmd, "--output_dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=ENV,
    )
    solvers: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 60
        while not (out / "rendezvous" / "rank_0.json").exists():
            assert trainer.poll() is None, trainer.communicate()
            assert time.monotonic() < deadline, "the trainer never published its endpoint"
            time.sleep(0.1)
        rng = np.random.default_rng(0)
        bounds = {"sigma": (9, 11), "rho": (26, 32), "beta": (2.4, 2.9),
                  "x0": (-15, 15), "y0": (-15, 15), "z0": (10, 40)}  # fmt: skip
        for sim in range(SIMULATIONS):
            parameters = {k: rng.uniform(*b) for k, b in bounds.items()}
            solver = [sys.executable, str(EXAMPLES / "solver.py"), "--time_steps", str(STEPS)]
            solvers.append(
                subprocess.Popen(
                    [
                        *solver,
                        "--rendezvous",
                        str(out / "rendezvous"),
                        "--simulation_id",
                        str(100 + sim),
                        "--parameters",
                        json.dumps(parameters),
                    ],
                    env=ENV,
                )  # fmt: skip
            )
        assert [s.wait(timeout=60) for s in solvers] == [0] * SIMULATIONS
        stdout, stderr = trainer.communicate(timeout=90)
    finally:
        for p in [trainer, *solvers]:
            if p.poll() is None:
                p.kill()
                p.wait()
    summary = summary_of(trainer.returncode, stdout, stderr)
    assert summary["study"] == {} and summary["simulation_seconds"] is None
    assert "waiting for 6 simulations" in stdout


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_lorenz_seeds_reports_each_seeds_rollout_error_and_the_spread(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLES / "train.py"), *TINY, "--seeds", "2", "--seed", "7",
           "--output_dir", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=ENV)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert [run["seed"] for run in report["seeds"]] == [7, 8]
    values = [run["rollout_mse"] for run in report["seeds"]]
    assert report["spread"] == pytest.approx(max(values) / min(values))
    assert (out / "seed-7").is_dir() and (out / "seed-8").is_dir()
    assert "rollout_mse over 2 seeds (7..8)" in proc.stdout
