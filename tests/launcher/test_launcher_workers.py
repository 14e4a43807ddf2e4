"""Callables and workers: a callable simulation runs in a subprocess via cloudpickle,
workers run several simulations (a dead worker's one is reassigned) and reach the
launcher on the endpoint it advertises (CURVE beyond loopback); a malformed launcher
key and a worker endpoint Slurm's nodes cannot reach are refused.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
import zmq
from launcher_runs import keys, launcher, receive, script, stream_study

from melissa_trainer.client.worker import WorkerClient
from melissa_trainer.launcher import ListSampler, LocalBackend
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.launcher.worker_mode import WorkerSupervisor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


WORKER = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

out, name = sys.argv[1], os.environ["MELISSA_TRAINER_WORKER"]
with open(os.path.join(out, f"{name}.process"), "w") as f:  # (its launcher's process)
    f.write(os.environ.get("MELISSA_TRAINER_LAUNCHER_PROCESS", ""))
done = 0
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with open(os.path.join(out, f"{name}.txt"), "a") as f:
        f.write(f"{sid}\n")
    client = Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters)
    for t in range(3):
        if done == 1 and t == 1:  # the first worker at its second simulation dies, once
            try:
                os.close(os.open(os.path.join(out, "crashed"), os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                client.close(bye=False)
                sys.exit(3)
        client.send(t, u=np.full(4, sid, np.float32))
    client.close()
    done += 1
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("worker", [False, True])
def test_a_callable_simulation_runs_in_a_subprocess_via_cloudpickle(
    tmp_path: Path, worker: bool
) -> None:
    steps = 3  # a local variable, captured by the closure: only cloudpickle ships that

    def simulation(simulation_id: int, parameters: dict[str, float]) -> None:
        import numpy as np

        from melissa_trainer.client import Client

        with Client({"u": ((4,), "float32")}) as client:
            for t in range(steps):
                client.send(t, u=np.full(4, parameters["x"], np.float32))

    receiver, buffer = receive(tmp_path, expected=3)
    sampler = ListSampler([{"x": 1.0}, {"x": 2.0}, {"x": 3.0}])
    launch = launcher(simulation, 3, sampler, job_limit=2, worker=worker)
    samples = stream_study(launch, tmp_path, receiver, buffer)
    assert keys(samples) == Counter({(s, t): 1 for s in range(3) for t in range(steps)})
    assert {int(s["simulation_id"]): float(s["u"][0]) for s in samples} == {0: 1, 1: 2, 2: 3}
    assert (tmp_path / "simulation.pkl").exists()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_workers_run_several_simulations_and_a_dead_workers_one_is_reassigned(
    tmp_path: Path,
) -> None:
    receiver, buffer = receive(tmp_path, expected=6)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path)]
    launch = launcher(worker, 6, job_limit=2, worker=True)
    samples = stream_study(launch, tmp_path, receiver, buffer)
    assert keys(samples) == Counter({(s, t): 1 for s in range(6) for t in range(3)})
    assert (tmp_path / "crashed").exists()
    record = records_of(launch.state_dict())
    assert sorted(r["exit_codes"] for r in record.values()) == [[0]] * 5 + [[3, 0]]
    per_worker = {p.stem: p.read_text().split() for p in tmp_path.glob("worker-*.txt")}
    assert max(len(sims) for sims in per_worker.values()) >= 2  # one job, several simulations
    assert sum(len(sims) for sims in per_worker.values()) == 7  # 6 + the one run twice
    assert all(p.name.startswith("worker-") for p in (tmp_path / "logs").iterdir())
    # each worker was told the launcher's process (this one: the launcher runs in it), so
    # that it can tell when it ended (tests/client/test_worker_orphaned_at_start.py)
    told = {p.read_text().split()[0] for p in tmp_path.glob("worker-*.process")}
    assert told == {str(os.getpid())}, told


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_workers_reach_the_launcher_on_the_endpoint_it_advertises(tmp_path: Path) -> None:
    """worker_bind on every interface, the address given to workers advertised: the
    workers connect there (not to loopback) and the study completes."""
    receiver, buffer = receive(tmp_path, expected=2)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path)]
    launch = launcher(
        worker, 2, worker=True, worker_bind="tcp://0.0.0.0:*", advertise_host="127.0.0.1"
    )

    def check_endpoint() -> None:
        supervisor = launch._supervisor
        assert isinstance(supervisor, WorkerSupervisor)
        assert supervisor.endpoint.startswith("tcp://127.0.0.1:")
        assert supervisor.socket.getsockopt_string(zmq.LAST_ENDPOINT).startswith("tcp://0.0.0.0:")
        assert supervisor.curve_public_key is not None  # beyond loopback: CURVE
        assert no_answer_without_the_key(supervisor.endpoint)

    samples = stream_study(launch, tmp_path, receiver, buffer, check_endpoint)
    assert keys(samples) == Counter({(s, t): 1 for s in range(2) for t in range(3)})


def no_answer_without_the_key(endpoint: str) -> bool:
    """A plain REQ socket (no CURVE) gets no answer from `endpoint` within 1 s."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 1000)
    try:
        sock.connect(endpoint)
        sock.send(json.dumps({"version": 1, "worker": "intruder", "finished": None}).encode())
        sock.recv()
        return False
    except zmq.Again:
        return True
    finally:
        sock.close(linger=0)
        ctx.term()


def test_a_worker_refuses_a_malformed_launcher_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_LAUNCHER", "tcp://127.0.0.1:5555")
    monkeypatch.setenv("MELISSA_TRAINER_WORKER", "worker-0")
    monkeypatch.setenv("MELISSA_TRAINER_LAUNCHER_KEY", "not-a-key")
    with pytest.raises(RuntimeError, match="40-character Z85 public key"):
        WorkerClient()


class OtherNodesBackend(LocalBackend):
    """Stands in for SlurmBackend, whose construction needs sbatch on PATH: the check
    below depends only on the backend's name, and must hold on machines without Slurm."""

    name = "slurm"


def test_worker_mode_on_slurm_needs_an_endpoint_the_nodes_reach() -> None:
    with pytest.raises(ValueError, match="worker_bind='tcp://127.0.0.1:\\*'.*tcp://\\*:\\*"):
        launcher(["sim"], 2, worker=True, backend=OtherNodesBackend)
    with pytest.raises(ValueError, match="worker_bind must be a ZeroMQ"):
        launcher(["sim"], 2, worker=True, worker_bind="localhost:5555")
    assert launcher(["sim"], 2, worker=True, backend=OtherNodesBackend, worker_bind="tcp://*:*")
