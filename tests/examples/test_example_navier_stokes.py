"""The Navier–Stokes example end to end in subprocesses, tiny: launched solvers stream to
the trainer under `python` and under `accelerate launch` with two processes (gloo on
CPU), and the model beats the mean field and persistence on held-out simulations; a
user's own model and optimizer train in it (`main(model=..., optimizer=...)`), and a model
worse than a baseline is printed worse. The solver against analytic solutions:
test_example_navier_stokes_solver.py; its models: test_example_navier_stokes_models.py;
its command line refused: test_example_navier_stokes_refusals.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from example_launch import two_ranks

# examples/ is on the tests' sys.path (pyproject): the example's modules by package name
from navier_stokes import train
from process_tree import processes_with, run_group

from melissa_trainer.hooks import SampleLedger
from melissa_trainer.lineage import check

EXAMPLE = Path(__file__).parents[2] / "examples" / "navier_stokes" / "train.py"

SIMULATIONS, STEPS = 16, 5
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "32",
    "--dt", "0.05", "--width", "12", "--modes", "8", "--layers", "3", "--num_validation", "2",
    "--buffer_size", "80", "--watermark", "16", "--batch_size", "8",
    "--sample_to_insert_ratio", "20", "--eval_steps", "none", "--logging_steps", "100",
    "--job_limit", "2", "--disable_progress_bar", "--json",
]  # fmt: skip


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    return json.loads(last)


def check_run(summary: dict, out: Path) -> None:
    """The stream delivered every (simulation, step) once, and the model learned: it
    beats predicting the mean field and persistence on held-out simulations, whose
    baselines are recomputed here from the solver (independent of the trainer)."""
    study = summary["study"]
    assert study["finished"] == SIMULATIONS and study["failed"] == 0 and study["running"] == 0
    assert summary["samples_received"] == SIMULATIONS * STEPS
    assert summary["steps"] > 0 and summary["model"] == "fno" and summary["grid_size"] == 32
    assert summary["val_mse"] < 0.7 * summary["mean_field_mse"]
    assert summary["val_mse"] < summary["persistence_mse"]
    assert (out / "navier_stokes_validation.png").stat().st_size > 10_000
    assert processes_with(str(out / "rendezvous")) == []  # no solver outlived the trainer


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_example_streams_from_launched_solvers_and_beats_both_baselines(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)
    assert "persistence" in proc.stdout and "overlap:" in proc.stdout
    assert "relative L2 error" in proc.stdout and "by lead time" in proc.stdout
    # the baselines, recomputed from the solver: the validation set of seed 42 + 1
    opts = train.FlowArgs(grid_size=32, time_steps=STEPS, dt=0.05, num_validation=2)
    expected = train.baselines(train.validation_set(opts, seed=43))
    assert summary["mean_field_mse"] == pytest.approx(expected["mean_field_mse"])
    assert summary["persistence_mse"] == pytest.approx(expected["persistence_mse"])
    check_relative_errors(summary, train.validation_set(opts, seed=43))


def check_relative_errors(summary: dict, validation: list[dict[str, np.ndarray]]) -> None:
    """The relative L2 errors and the errors by lead time: the baselines' recomputed
    here from the validation fields (numpy, apart from the example's `errors.py`), the
    model's consistent with its MSE (the trainer's validation, over every lead time) and
    better than the mean field's."""
    truth = np.stack([s["vorticity"] for s in validation]).astype(np.float64)
    initial = np.stack([s["initial"] for s in validation]).astype(np.float64)
    steps = np.array([int(s["time_step"]) for s in validation])

    def rel(guess: np.ndarray) -> np.ndarray:
        pairs = zip(guess, truth, strict=True)
        return np.array([np.linalg.norm(g - t) / np.linalg.norm(t) for g, t in pairs])

    mean_field = rel(np.broadcast_to(truth.mean(axis=0), truth.shape))
    persistence = rel(initial)
    assert summary["mean_field_rel_l2"] == pytest.approx(mean_field.mean())
    assert summary["persistence_rel_l2"] == pytest.approx(persistence.mean())
    rows = summary["by_lead_time"]
    assert [r["time_step"] for r in rows] == list(range(STEPS))
    for k, row in enumerate(rows):
        assert row["t"] == pytest.approx((k + 1) * 0.5) and row["samples"] == 2
        assert row["mean_field_rel_l2"] == pytest.approx(mean_field[steps == k].mean())
        assert row["persistence_rel_l2"] == pytest.approx(persistence[steps == k].mean())
    assert np.mean([r["val_mse"] for r in rows]) == pytest.approx(summary["val_mse"], rel=1e-4)
    assert np.mean([r["val_rel_l2"] for r in rows]) == pytest.approx(summary["val_rel_l2"])
    assert 0 < summary["val_rel_l2"] < summary["mean_field_rel_l2"]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_example_runs_under_accelerate_launch_with_two_processes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [*two_ranks(), str(EXAMPLE), *TINY, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = run_group(cmd, timeout=220, cwd=tmp_path, env=env)
    check_run(summary_of(proc), out)  # samples_received: summed over the two ranks


class MyOperator(torch.nn.Module):
    """A user's own surrogate: periodic 3x3 convolutions, (batch, 4, n, n) -> (batch,
    1, n, n); `squeeze` returns (batch, n, n) instead, the wrong shape."""

    def __init__(self, squeeze: bool = False) -> None:
        super().__init__()
        conv: dict[str, Any] = {"kernel_size": 3, "padding": 1, "padding_mode": "circular"}
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(4, 16, **conv), torch.nn.GELU(), torch.nn.Conv2d(16, 1, **conv)
        )
        self.squeeze = squeeze

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        return out[:, 0] if self.squeeze else out


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_your_own_model_and_optimizer_train_in_the_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`main(model=..., optimizer=..., hooks=...)`, the how-to's way to bring a model:
    the study streams into it, trained by the optimizer made for it (a fused Adam), the
    user's hook (a `SampleLedger`) sees every step, and the summary names it; a model of
    the wrong shape stops at the first step, naming both shapes, and leaves no solver
    running."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    made: list[torch.optim.Optimizer] = []

    def fused_adam(model: torch.nn.Module) -> torch.optim.Optimizer:
        made.append(torch.optim.Adam(model.parameters(), lr=3e-3, fused=True))
        return made[-1]

    out = tmp_path / "own"
    flags = [*TINY, "--no_plot", "--output_dir", str(out)]
    summary = train.main(flags, model=MyOperator(), optimizer=fused_adam, hooks=[SampleLedger()])
    assert summary["model"] == "MyOperator" and summary["steps"] > 0
    assert summary["samples_received"] == SIMULATIONS * STEPS
    # the user's hook, beside the example's own: its ledger has every step trained
    ledger = check(out, simulations=SIMULATIONS, steps=STEPS)
    assert {r[0] for r in ledger.runs[0].records} == set(range(1, summary["steps"] + 1))
    assert np.isfinite(summary["val_mse"])
    assert len(made) == 1 and made[0].state  # the run's optimizer, and it stepped
    assert processes_with(str(out / "rendezvous")) == []

    wrong = tmp_path / "wrong"
    with pytest.raises(
        ValueError, match=r"outputs have shape \(8, 32, 32\) and the targets \(8, 1, 32, 32\)"
    ):
        train.main([*TINY, "--no_plot", "--output_dir", str(wrong)], model=MyOperator(squeeze=True))
    assert processes_with(str(wrong / "rendezvous")) == []


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_model_worse_than_a_baseline_is_printed_worse(tmp_path: Path) -> None:
    """After one step the model is far worse than the mean field: the line says "Nx
    worse", with N the ratio of the printed errors (it said "0.0x better"). The oracle
    is the printed MSEs themselves, whichever way they compare."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), "--grid_size", "16", "--dt", "0.1", "--width", "4",
           "--modes", "4", "--layers", "1", "--num_simulations", "2", "--time_steps", "2",
           "--num_validation", "1", "--max_steps", "1", "--watermark", "1",
           "--batch_size", "2", "--eval_steps", "none", "--job_limit", "2", "--no_plot",
           "--disable_progress_bar", "--output_dir", str(out)]  # fmt: skip
    proc = run_group(cmd, timeout=160, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("validation MSE "))
    found = re.search(
        r"validation MSE (\S+) .* mean field (\S+) \((\S+)x (better|worse)\) and "
        r"persistence (\S+) \((\S+)x (better|worse)\)",
        line,
    )
    assert found, line
    ours = float(found[1])
    for baseline, ratio, word in ((found[2], found[3], found[4]), (found[5], found[6], found[7])):
        base = float(baseline)
        assert word == ("better" if ours <= base else "worse"), line
        assert float(ratio) == pytest.approx(max(base, ours) / min(base, ours), abs=0.051)
    assert float(found[2]) < ours, f"the test wants a model worse than the mean field: {line}"
