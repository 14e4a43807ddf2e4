"""Several nodes, for real, on one machine: network namespaces stand in for them.

Two training "nodes" (namespaces node0 and node1, one CPU process each) run
``accelerate launch --multi_gpu --num_machines 2`` over gloo; the launcher on node0
runs its workers in a third namespace ("sims"), from where they reach the receivers
and the launcher over the nodes' 10.x addresses with CURVE only: each namespace has
its own loopback (checked). Every ``(simulation, step)`` must be trained on exactly
once, the parameters must be identical on both ranks after every step, and the run
must end, with nothing left running, well within its timeout. See tests/netns.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import netns
import pytest
import zmq

pytestmark = [pytest.mark.slow]

SCRIPT = Path(__file__).parent / "scripts" / "multinode_train.py"
ROOT = Path(__file__).parents[1]
SIMULATIONS, STEPS, WORKERS, BATCH = 8, 4, 2, 2
#: the launch's own bound, inside the test's timeout (a run: ~10 s idle, ~30 s on a busy machine)
LAUNCH_TIMEOUT = 150.0
#: the gloo rendezvous port: any port, each node has its own (empty) port space
MAIN_PORT = 29500


@pytest.fixture
def net() -> Iterator[netns.Nodes]:
    """node0, node1 and sims (tests/netns.py), deleted after the test whatever happens;
    skips where namespaces cannot be made."""
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"no network namespaces here: {reason}")
    netns.remove_leftovers()
    with netns.nodes(("node0", "node1", "sims")) as nodes:
        yield nodes


def launch_node(net: netns.Nodes, rank: int, tmp_path: Path, secret: str) -> subprocess.Popen:
    role = f"node{rank}"
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    command = [
        accelerate, "launch", "--multi_gpu", "--num_machines", "2", "--num_processes", "2",
        "--machine_rank", str(rank), "--main_process_ip", net.addresses["node0"],
        "--main_process_port", str(MAIN_PORT), "--mixed_precision", "no",
        "--dynamo_backend", "no",
        str(SCRIPT),
        "--output_dir", str(tmp_path / "out"), "--batch_size", str(BATCH),
        "--buffer", "fifo", "--buffer_size", "64", "--stop_sync_steps", "2",
        "--report_to", "none",
        "--disable_progress_bar", "--logging_steps", "100",
        "--node_address", net.addresses[role], "--sims_netns", net.namespaces["sims"],
        "--simulations", str(SIMULATIONS), "--steps", str(STEPS), "--workers", str(WORKERS),
        "--record", str(tmp_path / "workers"),
    ]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",  # gloo on CPU, whatever the machine has
        # gloo picks the interface its host name resolves to, else loopback: in a
        # namespace (and on a node with several networks) name the one to use
        "GLOO_SOCKET_IFNAME": netns.INTERFACE,
        "MULTINODE_CURVE_SECRET": secret,
    }
    with (tmp_path / f"{role}.log").open("w") as log:  # (the child has its own copy)
        return subprocess.Popen(
            net.argv(role, command), stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # (a timeout kills the whole launch)
        )  # fmt: skip


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[int | None]:
    deadline = time.monotonic() + timeout
    codes: list[int | None] = [None] * len(procs)
    while time.monotonic() < deadline and None in codes:
        codes = [p.poll() for p in procs]
        time.sleep(0.1)
    for p, code in zip(procs, codes, strict=True):
        if code is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    return codes


@pytest.mark.timeout(180)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_two_nodes_and_their_simulations_in_namespaces(net: netns.Nodes, tmp_path: Path) -> None:
    # each node's loopback is its own: whatever connects below crossed the veths
    for server, client in (("node0", "node1"), ("node0", "sims")):
        assert netns.check_isolation(net, server, client) == {
            "address": "ok",
            "loopback": "ConnectionRefusedError",
        }
    (tmp_path / "workers").mkdir()
    public, secret = zmq.curve_keypair()
    started = time.monotonic()
    procs = [launch_node(net, rank, tmp_path, secret.decode()) for rank in (0, 1)]
    codes = wait_all(procs, LAUNCH_TIMEOUT)
    wall = time.monotonic() - started
    logs = "\n".join(
        f"--- node{r} ---\n" + (tmp_path / f"node{r}.log").read_text()[-4000:] for r in (0, 1)
    )
    assert codes == [0, 0], f"exit codes {codes} after {wall:.0f} s\n{logs}"
    assert wall < LAUNCH_TIMEOUT / 2, f"the run ended after {wall:.0f} s: a hang at the end?"
    assert net.pids() == {"node0": [], "node1": [], "sims": []}, "processes left behind"

    ranks = [json.loads((tmp_path / "out" / f"rank_{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2] and {r["backend"] for r in ranks} == {"gloo"}
    # exactly once across the ranks; time step t went to rank t % 2
    seen = [tuple(k) for r in ranks for k in r["seen"]]
    assert sorted(seen) == [(s, t) for s in range(SIMULATIONS) for t in range(STEPS)]
    assert all(t % 2 == r["rank"] for r in ranks for _, t in r["seen"])
    # DDP kept the replicas identical after every step (and they did train)
    steps = SIMULATIONS * STEPS // 2 // BATCH
    assert [s for s, _ in ranks[0]["checksums"]] == list(range(1, steps + 1))
    assert ranks[0]["checksums"] == ranks[1]["checksums"]
    assert len({c for _, c in ranks[0]["checksums"]}) == steps
    assert ranks[0]["launcher"]["finished"] == SIMULATIONS

    # the receivers published the nodes' addresses and the CURVE key
    for rank in (0, 1):
        entry = json.loads((tmp_path / "out" / "rendezvous" / f"rank_{rank}.json").read_text())
        assert entry["endpoint"].startswith(f"tcp://{net.addresses[f'node{rank}']}:")
        assert entry["curve_public_key"] == public.decode()
    # the workers ran in the sims namespace, asked node0's launcher over CURVE, are gone
    workers = [json.loads(p.read_text()) for p in (tmp_path / "workers").iterdir()]
    assert workers and {w["netns"] for w in workers} == {net.netns_id("sims")}
    assert all(w["launcher"].startswith(f"tcp://{net.addresses['node0']}:") for w in workers)
    assert all(w["launcher_key"] for w in workers)
    assert sorted(s for w in workers for s in w["simulations"]) == list(range(SIMULATIONS))
    for w in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(w["pid"], 0)
