"""What the heat example's end-to-end tests share (tests/examples/test_example_heat*.py):
the example's path, a tiny study's command line, the marks of its runs, the check of a
run's ``--json`` summary, and the environment of its tampered solvers."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from process_tree import processes_with

__all__ = [
    "EXAMPLE", "KEYS", "MARKS", "SIMULATIONS", "STEPS", "TINY", "VALIDATION",
    "check_run", "summary_of", "tampered_env",
]  # fmt: skip

#: the marks of every test file of the heat example's runs
MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"

SIMULATIONS, STEPS, VALIDATION = 16, 20, 4
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "10",
    "--job_limit", "2", "--num_validation", str(VALIDATION), "--hidden", "64",
    "--learning_rate", "3e-3", "--buffer_size", "400", "--watermark", "60", "--batch_size", "16",
    "--sample_to_insert_ratio", "20", "--eval_steps", "none", "--logging_steps", "100",
    "--disable_progress_bar", "--json",
]  # fmt: skip
KEYS = {"val_mse", "val_mse_p99", "val_mse_max", "val_simulations", "val_mse_per_simulation",
        "mean_field_mse", "wall_seconds",
        "simulation_seconds", "training_seconds",
        "sequential_seconds", "samples_seen", "samples_received", "steps",
        "simulations_finished", "study", "plot", "samples_refused_nonfinite"}  # fmt: skip


def _not_json(constant: str) -> None:
    raise ValueError(f"the --json line holds {constant}, which is not JSON")


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    summary = json.loads(last, parse_constant=_not_json)  # strict: no NaN or Infinity
    assert set(summary) >= KEYS
    return summary


def check_run(summary: dict, out: Path) -> None:
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    # the tails of the 4 held-out simulations (equal sizes: val_mse is their mean), said
    # with their count; the example's own per-simulation errors (its model run on the
    # set) against the trainer's validation, computed apart
    assert summary["val_mse"] <= summary["val_mse_p99"] <= summary["val_mse_max"]
    errors = np.array(summary["val_mse_per_simulation"])
    assert summary["val_simulations"] == len(errors) == VALIDATION
    assert errors.max() == pytest.approx(summary["val_mse_max"], rel=1e-4)
    assert np.percentile(errors, 99) == pytest.approx(summary["val_mse_p99"], rel=1e-4)
    assert errors.mean() == pytest.approx(summary["val_mse"], rel=1e-4)
    # the library's held-out file names the same worst (held-out i is id -1 - i), each
    # simulation with its parameters; the JSON names it and the study's draws.csv
    assert summary["held_out_csv"] == str(out / "held_out_losses.csv")
    assert summary["draws_csv"] == str(out / "study" / "draws.csv")
    assert (out / "study" / "draws.csv").exists()
    with (out / "held_out_losses.csv").open(newline="") as file:
        held = list(csv.DictReader(file))
    assert [int(r["simulation_id"]) for r in held] == [-1 - int(i) for i in np.argsort(-errors)]
    scale = errors.max() / float(held[0]["loss"])  # (the example's kelvin, squared)
    for row in held:
        assert float(row["loss"]) * scale == pytest.approx(
            errors[-1 - int(row["simulation_id"])], rel=1e-4
        )
        assert set(row) >= {"t_initial", "t_left", "t_right", "t_bottom", "t_top"}
    study = summary["study"]
    assert study["failed"] == study["restarts"] == study["redraws"] == study["abandoned"] == 0
    # the stream ended: the source let the simulations exit before stopping the launcher
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert summary["samples_received"] == SIMULATIONS * STEPS  # each (simulation, step) once
    assert summary["samples_refused_nonfinite"] == 0
    assert summary["simulation_seconds"] > 0 and summary["training_seconds"] > 0
    assert summary["samples_seen"] >= summary["samples_received"]  # each drawn at least once
    assert Path(summary["plot"]) == out / "heat_pde_validation.png"
    assert (out / "heat_pde_validation.png").stat().st_size > 10_000
    assert list((out / "runs").glob("events.out.tfevents.*"))
    assert processes_with(str(out / "rendezvous")) == []  # no simulation outlived the trainer


def tampered_env(**variables: str) -> dict[str, str]:
    """This process's environment with tests/scripts/tampered_solvers (a sitecustomize.py
    that reads `variables`: SOLVER_BROKEN, SOLVER_NAN, SOLVER_HANG) first on PYTHONPATH,
    and one OpenMP thread."""
    tampered = Path(__file__).parents[1] / "scripts" / "tampered_solvers"
    path = os.pathsep.join(filter(None, [str(tampered), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **variables}
