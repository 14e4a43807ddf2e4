"""The heat-PDE example (the README's first command), end to end in subprocesses, tiny:
launched solver processes stream to the trainer under `python` and under
`accelerate launch` with two processes (gloo on CPU), the latter with `--sampler breed`
(both ranks' losses steer the adaptive sampler); its buffer, precision and seed flags,
and its own options refused as usage errors. Its failures and stops:
test_example_heat_failures.py; its output directory and checkpoints refused:
test_example_heat_output_dir.py (their shared set-up: heat_run.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from example_launch import two_ranks
from heat_run import EXAMPLE, MARKS, SIMULATIONS, TINY, VALIDATION, check_run, summary_of
from process_tree import run_group
from usage_error import heat_usage_error

pytestmark = MARKS


# hang guards, not time limits: ~30 s alone, >100 s beside another xdist worker on a busy
# 2-core machine (test_stopping_the_trainer_... waits as long for its solvers, likewise)
@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_heat_example_streams_from_launched_solvers_and_beats_the_mean_field(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)
    assert summary["sampler"] is None  # a fixed design (LHS): nothing observed
    assert "overlap:" in proc.stdout and "validation MSE" in proc.stdout
    assert f"per held-out simulation (of {VALIDATION}," in proc.stdout
    assert "judging --sampler" not in proc.stdout  # (said to adaptive runs only)
    assert len(list((out / "study" / "logs").glob("*.log"))) >= SIMULATIONS  # one per job


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_heat_example_samples_with_the_density_sampler(tmp_path: Path) -> None:
    """``--sampler density`` (the guide's adaptive sampler for 6 parameters and more):
    the whole budget drawn by it, the trainer's per-simulation losses fed to it, and the
    line that says how its draws were made in its own terms."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--sampler", "density", "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)
    drawn = summary["sampler"]
    assert drawn["draws"] == SIMULATIONS and drawn["observed"] > 0
    # the losses it held when it made its last draw (the end's are observed after it)
    assert 0 <= drawn["observed_at_last_draw"] <= drawn["observed"]
    assert "with the high-loss warp" in drawn["drawn_by"]
    # said once, by the study's account (INFO: printed; WARNING: logged), every fact in it
    said = proc.stdout + proc.stderr
    assert said.count("adaptive sampler: of") == 1 and "density: of" not in said, said
    (line,) = [x for x in said.splitlines() if f"adaptive sampler: of {SIMULATIONS} draws" in x]
    assert "of them by its last draw" in line and "(the last 100 kept)" in line, line
    # how to judge it: the A/B against the plain design on the same seeds
    assert "judging --sampler density" in proc.stdout
    assert f"--sampler lhs --num_simulations {SIMULATIONS} --seed 42 --seeds 3" in proc.stdout


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_heat_example_runs_under_accelerate_launch_with_two_processes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [*two_ranks(), str(EXAMPLE), *TINY, "--sampler", "breed", "--output_dir", str(out)]
    # gloo on CPU on any machine (1 GPU cannot hold 2 ranks)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = run_group(cmd, timeout=160, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)  # samples_received: summed over the two ranks' receivers
    # the adaptive sampler drew the whole budget and was fed the reduced losses
    breed = summary["sampler"]
    assert breed["draws"] == SIMULATIONS and 0 < breed["explored"] <= SIMULATIONS
    assert breed["observed"] > 0
    # said once, by the study's account (the example's own second line is gone)
    said = proc.stdout + proc.stderr
    assert said.count(f"adaptive sampler: of {SIMULATIONS} draws") == 1, said[-3000:]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_heat_example_runs_with_a_fifo_buffer_out_of_the_box(tmp_path: Path) -> None:
    """`--buffer fifo` alone: the example's rate limit (`sample_to_insert_ratio` 8, a
    reservoir's option) is not its default then (it was, and the run was refused)."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "4", "--time_steps", "10", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
             "--buffer", "fifo", "--buffer_size", "32", "--watermark", "8", "--batch_size", "4",
             "--eval_steps", "none", "--disable_progress_bar", "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=100, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    assert summary["samples_received"] == 4 * 10  # each (simulation, step) once
    assert summary["samples_seen"] == 4 * 10  # a FIFO serves each sample once
    assert summary["study"]["finished"] == 4 and summary["study"]["failed"] == 0


@pytest.mark.e2e
def test_heat_example_trains_under_bf16_with_its_buffer_on_the_accelerator(
    tmp_path: Path,
) -> None:
    """Two flags the example parses, in one run (they were two runs of the same study):
    `--mixed_precision bf16` trains under Accelerate's bf16 autocast, on CPU too, to a
    finite error; `--buffer_device accelerator` (a flag its --help lists) trains with
    batches gathered where the buffer is, through its `process_batch` (a user's report:
    it raised, the example passing a per-sample function); on CPU, the CPU."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "4", "--time_steps", "10", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
             "--buffer_size", "64", "--watermark", "8", "--batch_size", "8",
             "--mixed_precision", "bf16", "--buffer_device", "accelerator",
             "--eval_steps", "none", "--disable_progress_bar", "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=100, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    assert summary["samples_received"] == 4 * 10
    assert summary["steps"] > 0 and 0 < summary["val_mse"] < float("inf")
    (saved,) = (out / "checkpoints").glob("checkpoint-*/training_args.json")  # at the end
    saved_args = json.loads(saved.read_text())
    assert saved_args["mixed_precision"] == "bf16"
    assert saved_args["buffer_device"] == "accelerator"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_seeds_runs_the_study_once_per_seed_and_reports_the_spread(tmp_path: Path) -> None:
    """`--seeds 2` (issue 44: two seeds of the default run differed 2x): the study run
    with seeds 3 and 4, each in its own output directory, each seed's error printed and
    the spread of the two; the numbers are each run's own summary's."""
    out = tmp_path / "out"
    flags = ["--num_simulations", "3", "--time_steps", "6", "--grid_size", "6",
             "--job_limit", "2", "--num_validation", "1", "--hidden", "8", "--no_plot",
             "--buffer_size", "32", "--watermark", "4", "--batch_size", "4",
             "--eval_steps", "none", "--disable_progress_bar", "--seed", "3", "--seeds", "2",
             "--json"]  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *flags, "--output_dir", str(out)]
    proc = run_group(cmd, timeout=200, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert [run["seed"] for run in report["seeds"]] == [3, 4]
    values = [run["val_mse"] for run in report["seeds"]]
    for run in report["seeds"]:  # each seed's own run, in its own directory
        saved = json.loads(next((out / f"seed-{run['seed']}" / "checkpoints").glob(
            "checkpoint-*/training_args.json")).read_text())  # fmt: skip
        assert saved["seed"] == run["seed"]
    assert report["min"] == min(values) and report["max"] == max(values)
    for run in report["seeds"]:  # each seed's worst held-out simulation, for an A/B
        # (of 1 held-out simulation: its error, the mean's up to rounding)
        assert run["val_mse_max"] == pytest.approx(run["val_mse"], rel=1e-5)
        assert (
            f"seed {run['seed']}: val_mse {run['val_mse']:.4g}, worst held-out "
            f"simulation {run['val_mse_max']:.4g}" in proc.stdout
        )
    assert report["spread"] == pytest.approx(max(values) / min(values))
    assert "over 2 seeds (3..4)" in proc.stdout and "max/min" in proc.stdout


def test_a_reservoir_option_given_with_a_fifo_names_the_flag_that_unsets_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Given explicitly, the rate limit is still refused with a FIFO: the error says
    how to unset it on the command line."""
    from heat_pde.train import parser  # the example's (examples/ is on sys.path)

    err = heat_usage_error(["--buffer", "fifo", "--sample_to_insert_ratio", "8"], capsys)
    assert "sample_to_insert_ratio=8.0 only applies to buffer='reservoir'" in err
    assert "--sample_to_insert_ratio None" in err
    args, _ = parser(["--buffer", "fifo"]).parse_args_into_dataclasses(["--buffer", "fifo"])
    assert args.buffer == "fifo" and args.sample_to_insert_ratio is None
    args, _ = parser([]).parse_args_into_dataclasses([])
    assert args.buffer == "reservoir" and args.sample_to_insert_ratio == 8.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--grid_size", "0", "grid_size=0 must be >= 2"),
        ("--time_steps", "0", "time_steps=0 must be >= 1"),
        ("--dt", "0", "dt=0.0 must be > 0"),
    ],
)
def test_a_bad_solver_option_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    """The solver's own options are refused by the parser (exit 2, the field named),
    not by a traceback from `main` once the trainer's setup has begun."""
    assert message in heat_usage_error([flag, value], capsys)
