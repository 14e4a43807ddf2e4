"""Studies on a real two-node Slurm cluster (tests/slurm_two_nodes.py: the second node
in its own network namespace, where this host's loopback is out of reach, as from a
real compute node).

* A study whose receiver binds every interface and advertises this host's address on
  the nodes' link: simulations placed on both nodes, every (simulation, step) once.
* The same with the default loopback bind: those placed on the other node fail at
  once, their log saying why (`ReceiverUnreachable`: a loopback endpoint of another
  machine) instead of after the client's 60 s as a receiver that never answered (and
  "start the trainer first"); those on this host deliver every step.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from slurm_jobs import POLL, PYTHON, queue
from slurm_two_nodes import OTHER, TwoNodeCluster, two_node_cluster

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.launcher import Launcher, LauncherTuning
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: each simulation marks its start and waits until all have started (so that they run
#: at once: more than one node's CPUs), then sends 4 steps and the node it ran on
SIMULATION = """
import json, os, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
started, n = Path(sys.argv[1]), int(sys.argv[2])
(started / f"{a:g}-{os.environ['SLURMD_NODENAME']}").touch()
while len(list(started.iterdir())) < n:
    time.sleep(0.05)
node = 1.0 if os.environ["SLURMD_NODENAME"] == sys.argv[3] else 0.0
with Client({"u": ((8,), "float64"), "node": ((1,), "float64")}, send_timeout=30) as client:
    for step in range(4):
        client.send(step, u=np.full(8, a + step), node=np.array([node]))
"""


def run_study(
    cluster: TwoNodeCluster,
    tmp_path: Path,
    n: int,
    config: ReceiverConfig,
    tuning: LauncherTuning | None = None,
) -> tuple[list[dict[str, np.ndarray]], Launcher]:
    """`n` simulations at once, all streaming to one receiver, until the launcher is done
    and every finished simulation's 4 steps are in; the samples and the launcher."""
    (tmp_path / "sim.py").write_text(SIMULATION)
    (tmp_path / "started").mkdir()
    buffer = FIFOBuffer(100)
    receiver = Receiver(buffer, config=config)
    launcher = Launcher(
        [PYTHON, str(tmp_path / "sim.py"), str(tmp_path / "started"), str(n), OTHER],
        [{"a": 10.0 * i} for i in range(n)],
        n,
        job_limit=n,
        backend=SlurmBackend(poll_every=POLL, time_limit=5),
        log_dir=tmp_path / "logs",
        tuning=tuning or LauncherTuning(max_restarts=0, on_failure="raise"),
    )
    receiver.start()
    samples: list[dict[str, np.ndarray]] = []
    try:
        launcher.start(tmp_path / "rdv", heartbeat=receiver.activity, study_dir=tmp_path)
        deadline = time.monotonic() + 100
        while not (launcher.done and len(samples) == 4 * launcher.summary()["finished"]):
            launcher.check()
            receiver.check()
            assert time.monotonic() < deadline, (launcher.summary(), len(samples), cluster.logs())
            try:
                samples += buffer.get_batch(1, timeout=0.2)
            except TimeoutError:
                continue
    finally:
        launcher.stop()
        receiver.stop()
    launcher.check()
    return samples, launcher


@pytest.mark.timeout(150)
def test_a_study_across_two_nodes(tmp_path: Path) -> None:
    with two_node_cluster() as cluster:
        n = 2 * cluster.cpus if cluster.cpus < 3 else 4  # (more than one node holds)
        config = ReceiverConfig(
            expected_simulations=n,
            rendezvous_dir=tmp_path / "rdv",
            bind="tcp://*:*",
            advertise_host=cluster.host_addr,
        )
        samples, _ = run_study(cluster, tmp_path, n, config)
        keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
        assert keys == [(sim, step) for sim in range(n) for step in range(4)]
        for sample in samples:
            a = 10.0 * int(sample["simulation_id"])
            np.testing.assert_array_equal(sample["u"], np.full(8, a + int(sample["time_step"])))
        assert {float(s["node"][0]) for s in samples} == {0.0, 1.0}  # (both nodes ran some)
        assert "sim-" not in queue()


@pytest.mark.timeout(150)
def test_a_loopback_receiver_is_said_out_of_reach_on_the_other_node(tmp_path: Path) -> None:
    with two_node_cluster() as cluster:
        n = 2 * cluster.cpus if cluster.cpus < 3 else 4
        config = ReceiverConfig(rendezvous_dir=tmp_path / "rdv")  # (loopback: the default)
        tuning = LauncherTuning(max_restarts=0, on_failure="abandon")
        samples, launcher = run_study(cluster, tmp_path, n, config, tuning)
        placed = {int(float(p.name.split("-")[0])) // 10: p.name.split("-")[1]
                  for p in (tmp_path / "started").iterdir()}  # fmt: skip
        there = sorted(sim for sim, node in placed.items() if node == OTHER)
        here = sorted(sim for sim, node in placed.items() if node != OTHER)
        assert there and here, placed
        keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
        assert keys == [(sim, step) for sim in here for step in range(4)]
        summary = launcher.summary()
        assert summary["abandoned"] == len(there) and summary["finished"] == len(here)
        for sim in there:
            log = (tmp_path / "logs" / f"sim-{sim}.log").read_text()
            assert "ReceiverUnreachable" in log and "loopback endpoint tcp://127.0.0.1:" in log, log
            assert "another network namespace" in log and "--bind 'tcp://*:*'" in log, log
            assert "no receiver ever accepted" not in log, log  # (not the 60 s wait's words)
        assert "sim-" not in queue()
