"""Studies on a real two-node Slurm cluster (tests/slurm_two_nodes.py: the second node
in its own network namespace, where this host's loopback is out of reach, as from a
real compute node).

* A study whose receiver binds every interface and advertises this host's address on
  the nodes' link: simulations placed on both nodes, every (simulation, step) once.
* The same with the default loopback bind: those placed on the other node fail at
  once, their log saying why (`ReceiverUnreachable`: a loopback endpoint of another
  machine) instead of after the client's 60 s as a receiver that never answered (and
  "start the trainer first"); those on this host deliver every step.
* With `tcp://*:*` and no `advertise_host`, the endpoint names this host, which the
  nodes' shared /etc/hosts maps to 127.0.0.1 (as on this machine; skipped where the name
  resolves elsewhere): those on the other node are told at once as well
  (`ReceiverUnreachable`, the name resolved to loopback), where they waited 60 s and
  said "no receiver ever accepted a connection ... start the trainer first" (a user
  trial of the heat example's `--backend slurm --bind 'tcp://*:*'`).
* The other node vanishing mid-study (every process there SIGKILLed, its link down, no
  word to anyone): Slurm marks it down after its SlurmdTimeout and requeues its jobs,
  the launcher says so and counts them queued, they run again on this host, and every
  (simulation, step) arrives once (the receiver drops the steps sent twice). With a
  `simulation_timeout` shorter than that, the launcher kills them as silent first and
  restarts them: the same end, and their restarts' HELLOs, while the vanished node's
  connections are still open (no FIN ever comes), are no MPI singletons (the 10 s
  grace of `twin_hellos` said so before).
* A node where every attempt fails (FAILING: each simulation placed on n1 exits 1):
  after `exclude_after` (2) failures there, the jobs submitted later leave it out
  (``--exclude=n1``, said in a WARNING), and the study completes on this host, every
  (simulation, step) once. Failed before (no exclusion): the restarts kept landing on n1,
  whose CPUs each failure freed, while this host's were busy, until a simulation had
  failed `max_restarts` + 1 times and the study raised.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from launcher_said import one_line
from slurm_jobs import POLL, PYTHON, queue
from slurm_two_nodes import OTHER, TwoNodeCluster, two_node_cluster

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: each simulation marks its start and waits until all have started (so that they run
#: at once: more than one node's CPUs), then sends STEPS steps, PAUSE s apart, and the
#: node it ran on
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
steps, pause = int(sys.argv[4]), float(sys.argv[5])
with Client({"u": ((8,), "float64"), "node": ((1,), "float64")}, send_timeout=30) as client:
    for step in range(steps):
        client.send(step, u=np.full(8, a + step), node=np.array([node]))
        time.sleep(pause)  # (the solver's own pace)
"""


def run_study(
    cluster: TwoNodeCluster,
    tmp_path: Path,
    n: int,
    config: ReceiverConfig,
    tuning: LauncherTuning | None = None,
    steps: int = 4,
    pause: float = 0.0,
    watch: Callable[[list[dict[str, np.ndarray]]], None] = lambda samples: None,
    simulation: str = SIMULATION,
) -> tuple[list[dict[str, np.ndarray]], Launcher]:
    """`n` simulations at once, all streaming `steps` steps to one receiver, until the
    launcher is done and every finished simulation's steps are in (`watch` is given the
    samples so far at each turn); the samples and the launcher. `simulation`: the
    script, given SIMULATION's arguments."""
    (tmp_path / "sim.py").write_text(simulation)
    (tmp_path / "started").mkdir()
    buffer = FIFOBuffer(100)
    receiver = Receiver(buffer, config=config)
    launcher = Launcher(
        [
            PYTHON,
            str(tmp_path / "sim.py"),
            str(tmp_path / "started"),
            str(n),
            OTHER,
            str(steps),
            str(pause),
        ],
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
        deadline = time.monotonic() + 180  # (a vanished node: SlurmdTimeout, the requeue)
        while not (launcher.done and len(samples) == steps * launcher.summary()["finished"]):
            launcher.check()
            receiver.check()
            watch(samples)
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


def placement(tmp_path: Path) -> tuple[list[int], list[int]]:
    """The simulations whose first start was on the other node, and those on this host
    (from the files SIMULATION touched as it started); both non-empty."""
    placed = {int(float(p.name.split("-")[0])) // 10: p.name.split("-")[1]
              for p in (tmp_path / "started").iterdir()}  # fmt: skip
    there = sorted(sim for sim, node in placed.items() if node == OTHER)
    here = sorted(sim for sim, node in placed.items() if node != OTHER)
    assert there and here, placed
    return there, here


def on_the_link(cluster: TwoNodeCluster, tmp_path: Path) -> tuple[int, ReceiverConfig]:
    """More simulations than one node holds, and receivers bound to every interface that
    advertise this host's address on the link (reachable from n1)."""
    n = 2 * cluster.cpus if cluster.cpus < 3 else 4
    config = ReceiverConfig(
        expected_simulations=n,
        rendezvous_dir=tmp_path / "rdv",
        bind="tcp://*:*",
        advertise_host=cluster.host_addr,
    )
    return n, config


@pytest.mark.timeout(150)
def test_a_study_across_two_nodes(tmp_path: Path) -> None:
    with two_node_cluster() as cluster:
        n, config = on_the_link(cluster, tmp_path)
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
        there, here = placement(tmp_path)
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


@pytest.mark.timeout(150)
def test_a_host_name_resolved_to_loopback_is_said_out_of_reach_on_the_other_node(
    tmp_path: Path,
) -> None:
    try:
        named = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError as exc:
        pytest.skip(f"this host's name does not resolve here: {exc}")
    if not all(a == "::1" or str(a).startswith("127.") for a in named):
        pytest.skip(f"this host's name resolves to {sorted(named)}, not loopback only")
    with two_node_cluster() as cluster:
        n = 2 * cluster.cpus if cluster.cpus < 3 else 4
        config = ReceiverConfig(rendezvous_dir=tmp_path / "rdv", bind="tcp://*:*")
        tuning = LauncherTuning(max_restarts=0, on_failure="abandon")
        samples, launcher = run_study(cluster, tmp_path, n, config, tuning)
        there, here = placement(tmp_path)
        keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
        assert keys == [(sim, step) for sim in here for step in range(4)]
        assert launcher.summary()["abandoned"] == len(there)
        for sim in there:
            log = (tmp_path / "logs" / f"sim-{sim}.log").read_text()
            assert "ReceiverUnreachable" in log and "resolves to loopback only" in log, log
            assert f"tcp://{socket.gethostname()}:" in log and "advertise_host" in log, log
            assert "no receiver ever accepted" not in log, log  # (not the 60 s wait's words)
        assert "sim-" not in queue()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("hung_after", [None, 6.0], ids=["slurm-notices", "killed-as-hung"])
def test_a_node_vanishing_mid_study_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, hung_after: float | None
) -> None:
    caplog.set_level(logging.WARNING, "melissa_trainer")
    with two_node_cluster() as cluster:
        n, steps = (2 * cluster.cpus if cluster.cpus < 3 else 4), 30
        config = ReceiverConfig(
            expected_simulations=n,
            rendezvous_dir=tmp_path / "rdv",
            bind="tcp://*:*",
            advertise_host=cluster.host_addr,
        )
        vanished: list[bool] = []

        def vanish_once(samples: list[dict[str, np.ndarray]]) -> None:
            if not vanished and sum(s["node"][0] == 1.0 for s in samples) >= 3:
                vanished.append(True)  # (its simulations are a few steps in)
                cluster.vanish()

        tuning = LauncherTuning(max_restarts=2, on_failure="raise")
        if hung_after is not None:  # (before Slurm's SlurmdTimeout: the launcher kills them)
            tuning = LauncherTuning(
                max_restarts=2, on_failure="raise", simulation_timeout=hung_after
            )
        samples, launcher = run_study(
            cluster, tmp_path, n, config, tuning, steps=steps, pause=0.3, watch=vanish_once
        )
        assert vanished, "nothing was sent from the other node"
        keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
        assert keys == [(sim, step) for sim in range(n) for step in range(steps)]  # (once)
        there = [int(float(p.name.split("-")[0])) // 10 for p in (tmp_path / "started").iterdir()
                 if p.name.endswith(f"-{OTHER}")]  # fmt: skip
        for sim in there:  # (the rest of each sent from this host, after Slurm's requeue)
            own = [s for s in samples if int(s["simulation_id"]) == sim]
            assert own[0]["node"][0] == 1.0 and own[-1]["node"][0] == 0.0, sim
        assert cluster.node_states()[OTHER].startswith("down"), cluster.node_states()
        lines = [one_line(r.getMessage()) for r in caplog.records]
        if hung_after is None:  # (Slurm's requeue, said)
            assert sum("put back in Slurm's queue" in line for line in lines) >= len(there)
        else:  # (the launcher's kill of a silent attempt, said; its restart no twin)
            assert sum("silent for" in line for line in lines) >= len(there), lines
        assert not [line for line in lines if "said HELLO as client rank" in line]
        assert launcher.summary()["finished"] == n and launcher.summary()["failed"] == 0
        assert "sim-" not in queue()


#: SIMULATION's arguments; on node sys.argv[3] it marks its failure and exits 1 at once
#: (a node whose simulations cannot run); elsewhere it marks its start, waits for the
#: file "go" beside the started directory (this host's CPUs held busy meanwhile, as by
#: long simulations), then sends its steps
FAILING = """
import os, sys, time
from pathlib import Path

started, node = Path(sys.argv[1]), os.environ["SLURMD_NODENAME"]
if node == sys.argv[3]:
    (started.parent / f"failed-{os.environ['SLURM_JOB_ID']}").touch()
    sys.exit(1)
import json
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
(started / f"{a:g}-{node}-{os.environ['SLURM_JOB_ID']}").touch()
while not (started.parent / "go").exists():
    time.sleep(0.05)
with Client({"u": ((8,), "float64"), "node": ((1,), "float64")}, send_timeout=30) as client:
    for step in range(int(sys.argv[4])):
        client.send(step, u=np.full(8, a + step), node=np.array([0.0]))
"""


@pytest.mark.timeout(240)
def test_a_node_that_fails_every_attempt_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "melissa_trainer")
    with two_node_cluster() as cluster:
        n, config = on_the_link(cluster, tmp_path)
        places = n - cluster.cpus  # (n1's share of the first launches, at most)

        def failed() -> int:
            return len(list(tmp_path.glob("failed-*")))

        def release(samples: list[dict[str, np.ndarray]]) -> None:
            """This host's simulations go on once n1's exclusion is said, or once n1 has
            failed every attempt its simulations have (without exclusion: the study
            has raised by then)."""
            said = any(f"node {OTHER} failed" in one_line(r.getMessage()) for r in caplog.records)
            if said or failed() >= 3 * places:
                (tmp_path / "go").touch()

        tuning = LauncherTuning(max_restarts=2, on_failure="raise", systematic_failures=None)
        samples, launcher = run_study(
            cluster, tmp_path, n, config, tuning, watch=release, simulation=FAILING
        )
        keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
        assert keys == [(sim, step) for sim in range(n) for step in range(4)]  # (once)
        assert failed() >= 2, failed()  # (n1 ran some, and they failed)
        assert all(p.name.split("-")[1] != OTHER for p in (tmp_path / "started").iterdir())
        lines = [one_line(r.getMessage()) for r in caplog.records]
        excluded = [line for line in lines if line.startswith(f"node {OTHER} failed")]
        assert len(excluded) == 1 and f"--exclude={OTHER}" in excluded[0], lines
        assert "exclude_after=2" in excluded[0], excluded
        # each failure's own line names its node too (`Backend.ran_on`; failed before):
        # the exclusion counted at least two of them on n1
        on_n1 = [line for line in lines if " failed (" in line and f"on node {OTHER})" in line]
        assert len(on_n1) >= 2, lines
        assert launcher.summary()["finished"] == n and launcher.summary()["failed"] == 0
        assert "sim-" not in queue()
