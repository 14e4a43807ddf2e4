"""The heat-PDE example in worker mode (``--worker``; ``solver.py --worker`` loops on
`next_simulation()`): the same fields as one process per simulation, a worker killed
mid-simulation costs that simulation only (run again, each (simulation, step) once),
the example trains under `python` and `accelerate launch` with it, and the launcher's
start-up advice, said in the default mode, names the flag.

The oracle of the fields is the solver's own `solve`, called here: each streamed field
must be its bits, in either mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from heat_pde.solver import PARAMETER_NAMES, HeatConfig, solve
from heat_run import SIMULATIONS, STEPS, TINY, check_run, summary_of
from held_ports import held_port
from launcher_said import one_line
from process_tree import processes_with, run_group
from worker_launch import run_study_to_end

from melissa_trainer.launcher import LauncherTuning

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "heat_pde" / "train.py"
SOLVER = ROOT / "examples" / "heat_pde" / "solver.py"
#: a sitecustomize.py that tampers with launched solvers (its docstring)
TAMPERED = ROOT / "tests" / "scripts" / "tampered_solvers"


def tampered_env(**variables: str) -> dict[str, str]:
    """This environment, one BLAS thread, the tampering sitecustomize on the path."""
    path = os.pathsep.join(filter(None, [str(TAMPERED), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **variables}


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["process", "worker"])
def test_each_simulation_streams_the_fields_solve_computes_in_either_mode(
    tmp_path: Path, mode: str
) -> None:
    """The heat solver under a real launcher, one process per simulation or as workers
    (``--worker``), one of which is killed (SIGKILL) mid-simulation: every (simulation,
    step) reaches the buffer once, and each field is the bits `solve` gives for that
    simulation's parameters, the killed simulation's included (run again from the
    start by another attempt)."""
    config = HeatConfig(grid_size=6, time_steps=5)
    n, killed_at = 4, tmp_path / "killed"
    parameters = [
        {name: 150.0 + 37.0 * i + 11.0 * j for j, name in enumerate(PARAMETER_NAMES)}
        for i in range(n)
    ]
    command = [sys.executable, str(SOLVER), *config.argv()]
    env = {"OMP_NUM_THREADS": "1"}
    if mode == "worker":
        command.append("--worker")
        # simulation 1's worker dies where it would send step 2, once
        tampered = tampered_env(SOLVER_WORKER_KILL=f"1:2:{killed_at}")
        env.update({k: tampered[k] for k in ("PYTHONPATH", "SOLVER_WORKER_KILL")})
    tuning = LauncherTuning(poll_interval=0.05, kill_grace=2.0)
    record, samples = run_study_to_end(command, parameters, tmp_path / "rendezvous", tuning,
                                       env, job_limit=2, worker=mode == "worker")  # fmt: skip
    keys = Counter((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == Counter({(s, t): 1 for s in range(n) for t in range(config.time_steps)})
    for sample in samples:
        sid, step = int(sample["simulation_id"]), int(sample["time_step"])
        expected = list(solve(parameters[sid], config))[step]
        assert sample["temperature"].dtype == np.float32
        assert np.array_equal(sample["temperature"], expected), (mode, sid, step)
        # the parameters in PARAMETER_NAMES order, as the trainer reads them
        assert sample["parameters"].tolist() == [parameters[sid][p] for p in PARAMETER_NAMES]
    codes = {sid: list(r["exit_codes"]) for sid, r in record.items()}
    if mode == "worker":
        assert killed_at.exists()  # the kill happened, mid-simulation (after step 1)
        assert codes.pop(1) == [-9, 0], codes
        # (the others finished at once: a worker reports a simulation finished only
        # once its BYE was ingested, so the killed one took none of its previous
        # simulation's steps with it; client/worker.py, tests/client/test_worker_receipt.py)
        assert list(codes.values()) == [[0]] * (n - 1), codes
        logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
        assert logs and all(name.startswith("worker-") for name in logs), logs
    else:
        assert list(codes.values()) == [[0]] * n, codes
    assert processes_with(str(tmp_path / "rendezvous")) == []


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_heat_example_trains_in_worker_mode_and_reruns_a_killed_workers_simulation(
    tmp_path: Path,
) -> None:
    """``train.py --worker`` (the README's first command with the flag): job_limit
    workers run the whole study, one of them killed mid-simulation; the study finishes
    every simulation (the killed one once restarted), each (simulation, step) trained
    once, and the surrogate beats the mean field as in the default mode."""
    out, killed_at = tmp_path / "out", tmp_path / "killed"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--worker", "--output_dir", str(out)]
    env = tampered_env(SOLVER_WORKER_KILL=f"3:5:{killed_at}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    assert killed_at.exists(), proc.stderr[-3000:]
    study = summary["study"]
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert study["restarts"] == 1, study  # the killed attempt, run again
    assert study["failed"] == study["redraws"] == study["abandoned"] == 0, study
    assert summary["samples_received"] == SIMULATIONS * STEPS  # each (simulation, step) once
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs  # no sim-N.log
    assert "dominates" not in proc.stderr  # (the start-up advice: never in worker mode)
    assert processes_with(str(out / "rendezvous")) == []


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_heat_example_worker_mode_runs_under_accelerate_launch_with_two_processes(
    tmp_path: Path,
) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(held_port()),
           str(EXAMPLE), *TINY, "--worker", "--output_dir", str(out)]  # fmt: skip
    # gloo on CPU on any machine (1 GPU cannot hold 2 ranks)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = run_group(cmd, timeout=160, cwd=tmp_path, env=env)
    summary = summary_of(proc)
    check_run(summary, out)  # every simulation finished, each (simulation, step) once
    logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_the_start_up_advice_names_the_examples_worker_flag(tmp_path: Path) -> None:
    """One process per simulation whose start-up dominates (a 2.5 s sleep at the
    solver's start, standing in for a busy machine's imports): the launcher's advice
    says how this example's user turns worker mode on (``--worker``), not only the
    library's ``Launcher(..., worker=True)``, which the example's user does not write."""
    out, n = tmp_path / "out", 3
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", str(n), "--no_plot",
           "--output_dir", str(out)]  # fmt: skip
    env = tampered_env(SOLVER_STARTUP_SLEEP="2.5")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=160, cwd=tmp_path, env=env)
    summary_of(proc)
    (advice,) = [line for line in one_line(proc.stderr).splitlines() if "dominates" in line]
    assert (
        "Worker mode pays it once per job: add --worker to this example's command line; "
        "in a study of your own, Launcher(..., worker=True)" in advice
    ), advice


def test_worker_mode_refuses_what_it_cannot_honour(capsys: pytest.CaptureFixture[str]) -> None:
    """``train.py --worker --external`` (no launcher for the workers to ask) and
    ``solver.py --worker`` with one simulation's own flags (a worker's come from the
    launcher; ``--simulation_id 0`` too) are usage errors, exit 2, naming the flags."""
    from heat_pde import solver
    from heat_pde.train import parser  # the example's (examples/ is on sys.path)

    argv = ["--worker", "--external"]
    with pytest.raises(SystemExit) as info:
        parser(argv).parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    assert "--worker runs the launcher's workers: not with --external" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        solver.main(["--worker", "--simulation_id", "0"])
    assert info.value.code == 2
    assert "not with ['--simulation_id']" in capsys.readouterr().err
