"""The Navier-Stokes example in worker mode (``--worker``; ``solver.py --worker`` loops
on `next_simulation()`): at the default 64^2 a process's start-up costs more than its
simulation (`benchmarks/ns_worker.py`), so worker mode pays it once per job, and the
launcher's start-up advice, said in the default mode, names the example's flag.

The oracles: the trainer's own record of each batch it trains on (a driver that logs
the batch before each step), against every (simulation, step) of the study, once; the
solver's `solve` and `initial_vorticity`, called here, against each field a worker
streams, bit for bit; the launcher's record of each attempt's exit code; /proc for the
processes left."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from launcher_said import one_line
from navier_stokes import flow_config, solver
from process_tree import processes_with, run_group
from worker_launch import run_study_to_end

from melissa_trainer.launcher import LauncherTuning

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "navier_stokes" / "train.py"
SOLVER = ROOT / "examples" / "navier_stokes" / "solver.py"
#: a sitecustomize.py that tampers with launched solvers (its docstring)
TAMPERED = ROOT / "tests" / "scripts" / "tampered_solvers"
SIMULATIONS, STEPS, BATCH = 6, 4, 4
#: tiny, and each sample trained once: a FIFO buffer, no rate limit, whole batches
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "16",
    "--dt", "0.1", "--width", "8", "--modes", "4", "--layers", "2", "--num_validation", "1",
    "--buffer", "fifo", "--buffer_size", "16", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", str(BATCH), "--eval_steps", "none",
    "--logging_steps", "100", "--job_limit", "2", "--disable_progress_bar", "--no_plot",
    "--json",
]  # fmt: skip
#: the example, run with a log of the (simulation, step) of each batch it trains on,
#: written before the step (`OnlineTrainer._training_step`, as tests/scripts/heat_lineage.py)
LINEAGE_DRIVER = f"""
import os, runpy, sys
from melissa_trainer.trainer.loop import OnlineTrainer
log = open(os.environ["LINEAGE_LOG"], "a", buffering=1)
plain_step = OnlineTrainer._training_step
def recorded_step(self, *, stage_next=False):
    samples = self.dataset.peek_pending()
    log.write(" ".join(f"{{int(s['simulation_id'])}}:{{int(s['time_step'])}}" for s in samples)
              + "\\n")
    plain_step(self, stage_next=stage_next)
OnlineTrainer._training_step = recorded_step
sys.argv = [{str(EXAMPLE)!r}, *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
LINUX = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


def tampered_env(**variables: str) -> dict[str, str]:
    """This environment, one BLAS thread, the tampering sitecustomize on the path."""
    path = os.pathsep.join(filter(None, [str(TAMPERED), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **variables}


@pytest.mark.slow
@pytest.mark.e2e
@LINUX
@pytest.mark.timeout(240)
def test_a_killed_workers_simulation_is_rerun_and_each_step_trained_exactly_once(
    tmp_path: Path,
) -> None:
    """``train.py --worker``: job_limit workers run the study, one of them SIGKILLed
    where it would send step 2 of simulation 2 (steps 0 and 1 already streamed); the
    relaunched worker runs that simulation again from its start, the study ends with
    every simulation finished, and the trainer trains on every (simulation, step)
    exactly once (the resent steps 0 and 1 dropped as duplicates)."""
    out, killed, lineage = tmp_path / "out", tmp_path / "killed", tmp_path / "lineage"
    env = tampered_env(SOLVER_WORKER_KILL=f"2:2:{killed}", LINEAGE_LOG=str(lineage),
                       CUDA_VISIBLE_DEVICES="")  # fmt: skip
    cmd = [sys.executable, "-c", LINEAGE_DRIVER, *TINY, "--worker", "--output_dir", str(out)]
    proc = run_group(cmd, timeout=220, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
    assert killed.exists(), proc.stderr[-3000:]  # the kill happened, mid-simulation
    study = summary["study"]
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert study["restarts"] == 1, study  # the killed attempt, run again
    assert study["failed"] == study["redraws"] == study["abandoned"] == 0, study
    batches = [line.split() for line in lineage.read_text().splitlines()]
    trained = Counter(tuple(int(v) for v in key.split(":")) for keys in batches for key in keys)
    assert trained == Counter({(s, t): 1 for s in range(SIMULATIONS) for t in range(STEPS)})
    assert all(len(keys) == BATCH for keys in batches), batches  # (whole lines: none cut)
    assert summary["samples_received"] == SIMULATIONS * STEPS
    logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs  # no sim-N.log
    assert "dominates" not in proc.stderr  # (the start-up advice: never in worker mode)
    assert processes_with(str(out / "rendezvous")) == []


@pytest.mark.slow
@pytest.mark.e2e
@LINUX
@pytest.mark.timeout(120)
def test_one_worker_streams_the_bits_solve_gives_and_fails_what_it_refuses(
    tmp_path: Path,
) -> None:
    """One worker (job_limit 1) runs four simulations in turn, the second with
    parameters the solver refuses (nu = 0): that one is a failed attempt with exit code
    2 (given up: no restart asked for) and the worker goes on with the others, each of
    whose fields is the bits `solve` computes here for its parameters from the initial
    field of its simulation id (the seed a process of its own takes), `initial` that
    field; one process ran them all."""
    config = flow_config.FlowConfig(grid_size=16, time_steps=3, dt=0.1)
    n, refused = 4, 1
    parameters = [
        {"nu": 0.012 + 0.01 * i, "amplitude": 0.06 + 0.04 * i, "wavenumber": 2.0 + 0.9 * i}
        for i in range(n)
    ]
    parameters[refused]["nu"] = 0.0
    rendezvous = tmp_path / "rendezvous"
    command = [sys.executable, str(SOLVER), *config.argv(), "--worker"]
    tuning = LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0,
                            on_failure="abandon")  # fmt: skip
    record, samples = run_study_to_end(
        command, parameters, rendezvous, tuning, env={"OMP_NUM_THREADS": "1"}
    )
    ran = [s for s in range(n) if s != refused]
    keys = Counter((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == Counter({(s, t): 1 for s in ran for t in range(config.time_steps)})
    for s in ran:
        fields = list(solver.solve(parameters[s], config, seed=s))
        initial = solver.initial_vorticity(config.grid_size, s).astype(np.float32)
        for sample in (x for x in samples if int(x["simulation_id"]) == s):
            step = int(sample["time_step"])
            assert sample["vorticity"].dtype == np.float32
            assert sample["vorticity"].tobytes() == fields[step].tobytes(), (s, step)
            assert sample["initial"].tobytes() == initial.tobytes(), (s, step)
            assert sample["parameters"].tolist() == list(parameters[s].values())
    codes = {sid: r["exit_codes"] for sid, r in record.items()}
    assert codes == {0: [0], 1: [2], 2: [0], 3: [0]}, codes
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["worker-0.log"]
    assert "simulation 1: nu=0.0 must be > 0" in (tmp_path / "logs" / "worker-0.log").read_text()
    assert processes_with(str(rendezvous)) == []


@pytest.mark.slow
@pytest.mark.e2e
@LINUX
@pytest.mark.timeout(180)
def test_the_start_up_advice_names_the_examples_worker_flag(tmp_path: Path) -> None:
    """One process per simulation whose start-up dominates (a 2.5 s sleep at the
    solver's start, standing in for a busy machine's imports): the launcher's advice
    says how this example's user turns worker mode on (``--worker``)."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE), *TINY, "--num_simulations", "3",
           "--output_dir", str(out)]  # fmt: skip
    env = tampered_env(SOLVER_STARTUP_SLEEP="2.5", CUDA_VISIBLE_DEVICES="")
    proc = run_group(cmd, timeout=160, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (advice,) = [line for line in one_line(proc.stderr).splitlines() if "dominates" in line]
    assert (
        "Worker mode pays it once per job: add --worker to this example's command line; "
        "in a study of your own, Launcher(..., worker=True)" in advice
    ), advice
    assert processes_with(str(out / "rendezvous")) == []


def test_worker_mode_refuses_what_it_cannot_honour(capsys: pytest.CaptureFixture[str]) -> None:
    """``train.py --worker --external`` (no launcher for the workers to ask) and
    ``solver.py --worker`` with one simulation's own flags (a worker's come from the
    launcher, its seed is each simulation's id) are usage errors, exit 2, naming the
    flags; a configuration the solver refuses is refused before any request."""
    from navier_stokes.train import parser

    argv = ["--worker", "--external"]
    with pytest.raises(SystemExit) as info:
        parser(argv).parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    assert "--worker runs the launcher's workers: not with --external" in capsys.readouterr().err
    for flags, named in (
        (["--seed", "3"], "['--seed']"),
        (["--simulation_id", "0", "--parameters", "{}"], "['--simulation_id', '--parameters']"),
        (["--save_npy", "x.npy"], "['--save_npy']"),
    ):
        with pytest.raises(SystemExit) as info:
            solver.main(["--worker", *flags])
        assert info.value.code == 2
        assert f"--worker takes its simulations from the launcher: not with {named}" in (
            capsys.readouterr().err
        )
    assert solver.main(["--worker", "--grid_size", "7"]) == 2  # checked before any request
    assert "grid_size=7 must be even and >= 8" in capsys.readouterr().err
