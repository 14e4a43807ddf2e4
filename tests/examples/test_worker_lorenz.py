"""The Lorenz example in worker mode (``--worker``; ``solver.py --worker`` loops on
`next_simulation()`): a trajectory costs far less than starting its process, so worker
mode pays that start-up once per job. The study trains as in the default mode, each
transition once, with one worker SIGKILLed mid-simulation (its simulation run again by
the relaunched worker); a single worker's stream is the bits `trajectory` gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import drain
from lorenz.solver import PARAMETER_BOUNDS, trajectory
from process_tree import processes_with
from test_example_lorenz import EXAMPLES, SIMULATIONS, TINY, summary_of

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

TAMPERED_SOLVERS = Path(__file__).parents[1] / "scripts" / "tampered_solvers"


@pytest.mark.timeout(150)
def test_lorenz_example_trains_in_worker_mode_and_reruns_a_killed_workers_simulation(
    tmp_path: Path,
) -> None:
    out, killed = tmp_path / "out", tmp_path / "killed"
    path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path,
           "SOLVER_WORKER_KILL": f"2:50:{killed}"}  # fmt: skip
    cmd = [sys.executable, str(EXAMPLES / "train.py"), *TINY, "--worker", "--no_plot",
           "--output_dir", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=130, cwd=tmp_path, env=env)
    summary = summary_of(proc.returncode, proc.stdout, proc.stderr)  # each transition once
    assert killed.exists(), proc.stderr[-3000:]
    study = summary["study"]
    assert study["finished"] == SIMULATIONS and study["running"] == 0, study
    assert study["restarts"] == 1, study  # the killed attempt, run again
    assert study["failed"] == study["redraws"] == study["abandoned"] == 0, study
    logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
    assert logs and all(name.startswith("worker-") for name in logs), logs
    assert "dominates" not in proc.stderr  # (the start-up advice: never in worker mode)
    assert processes_with(str(out / "rendezvous")) == []


@pytest.mark.timeout(90)
def test_one_lorenz_worker_streams_the_trajectories_it_is_given(tmp_path: Path) -> None:
    """One worker runs the whole study: each transition it sends is the pair of states
    `trajectory` gives for that simulation's parameters, at that step."""
    n, steps, dt = 3, 30, 0.01
    parameters = [
        {
            name: low + (high - low) * (i + 1) / (n + 1)
            for name, (low, high) in PARAMETER_BOUNDS.items()
        }
        for i in range(n)
    ]
    buffer = FIFOBuffer(1000)
    rendezvous = tmp_path / "rendezvous"
    receiver = Receiver(buffer, config=ReceiverConfig(expected_simulations=n,
                                                      rendezvous_dir=rendezvous))  # fmt: skip
    receiver.start()
    command = [sys.executable, str(EXAMPLES / "solver.py"), "--time_steps", str(steps),
               "--dt", repr(dt), "--worker"]  # fmt: skip
    launch = Launcher(command, parameters, n, job_limit=1, backend=LocalBackend(), worker=True,
                      env={"OMP_NUM_THREADS": "1"},
                      tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0))  # fmt: skip
    try:
        launch.start(rendezvous, heartbeat=receiver.activity, data=receiver)
        samples = drain(buffer, timeout=60)
    finally:
        launch.stop()
        receiver.stop()
    assert len(samples) == n * steps
    for sample in samples:
        sid, k = int(sample["simulation_id"]), int(sample["time_step"])
        states = trajectory(parameters[sid], steps, dt)
        assert sample["transition"].tobytes() == states[k : k + 2].tobytes(), (sid, k)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["worker-0.log"]
    assert processes_with(str(rendezvous)) == []


def test_lorenz_worker_mode_refuses_what_it_cannot_honour(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``train.py --worker --external`` and ``solver.py --worker --parameters ...`` are
    usage errors (exit 2) naming the flags, as the heat example's."""
    from lorenz import solver
    from lorenz.train import parser

    argv = ["--worker", "--external"]
    with pytest.raises(SystemExit) as info:
        parser(argv).parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    assert "--worker runs the launcher's workers: not with --external" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        solver.main(["--worker", "--parameters", "{}"])
    assert info.value.code == 2
    assert "not with ['--parameters']" in capsys.readouterr().err
    assert solver.main(["--worker", "--time_steps", "0"]) == 2  # checked before any request
    assert "need time_steps >= 1" in capsys.readouterr().err
