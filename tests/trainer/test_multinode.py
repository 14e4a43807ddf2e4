"""Several nodes, for real, on one machine: network namespaces stand in for them.

Two training "nodes" (namespaces node0 and node1, one CPU process each) run
``accelerate launch --multi_gpu --num_machines 2`` over gloo; the launcher on node0
runs its workers in a third namespace ("sims"), from where they reach the receivers
and the launcher over the nodes' 10.x addresses with CURVE only: each namespace has
its own loopback (checked). Every ``(simulation, step)`` must be trained on exactly
once, the parameters must be identical on both ranks after every step, and the run
must end on its own, with nothing left running, within its timeout. See tests/netns.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import netns
import pytest
import zmq

from melissa_trainer.checkpoint.paths import count_ranks
from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SCRIPT = Path(__file__).parents[1] / "scripts" / "multinode_train.py"
ROOT = Path(__file__).parents[2]
SIMULATIONS, STEPS, WORKERS, BATCH = 8, 4, 2, 2
#: the launch's own bound, inside the test's timeout (a run: ~10 s idle, ~30 s on a busy machine)
LAUNCH_TIMEOUT = 150.0
#: every (simulation, time step) of the study, in order
STUDY = [(s, t) for s in range(SIMULATIONS) for t in range(STEPS)]
#: the first run of the resize test stops at this step, of the study's 8 on 2 ranks
FIRST_STEPS = 4
#: the gloo rendezvous port: any port, each node has its own (empty) port space
MAIN_PORT = 29500


needs_curve = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")


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


def launch_node(
    net: netns.Nodes,
    rank: int,
    tmp_path: Path,
    secret: str,
    *,
    machines: int = 2,
    run: str = "run",
    extra: Sequence[str] = (),
) -> subprocess.Popen:
    """Node `rank`'s training of the study, in its namespace, logging to
    ``{role}.{run}.log``: `accelerate launch` on `machines` nodes of one process each,
    or, with one machine, the script run by plain python (one process, no launcher)."""
    role = f"node{rank}"
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    launch = [sys.executable] if machines == 1 else [
        accelerate, "launch", "--multi_gpu", "--num_machines", str(machines),
        "--num_processes", str(machines), "--machine_rank", str(rank),
        "--main_process_ip", net.addresses["node0"], "--main_process_port", str(MAIN_PORT),
        "--mixed_precision", "no", "--dynamo_backend", "no",
    ]  # fmt: skip
    command = [
        *launch, str(SCRIPT),
        "--output_dir", str(tmp_path / "out"), "--batch_size", str(BATCH),
        "--buffer", "fifo", "--buffer_size", "64", "--stop_sync_steps", "2",
        "--report_to", "none",
        "--disable_progress_bar", "--logging_steps", "100",
        "--node_address", net.addresses[role], "--sims_netns", net.namespaces["sims"],
        "--simulations", str(SIMULATIONS), "--steps", str(STEPS), "--workers", str(WORKERS),
        "--record", str(tmp_path / "workers"), "--run", run, *extra,
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
    with log_path(tmp_path, rank, run).open("w") as log:  # (the child has its own copy)
        return subprocess.Popen(
            net.argv(role, command), stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # (a timeout kills the whole launch)
        )  # fmt: skip


def log_path(tmp_path: Path, rank: int, run: str) -> Path:
    return tmp_path / f"node{rank}.{run}.log"


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


def run_nodes(
    net: netns.Nodes,
    tmp_path: Path,
    secret: str,
    *,
    machines: int = 2,
    run: str = "run",
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Run the study on nodes 0 .. `machines` - 1 until every launch exits; check that
    each exited 0 on its own within `LAUNCH_TIMEOUT` (no wall-clock bound tighter
    than that: under load gloo's start alone took 39 s), leaving nothing running in any
    namespace; return each rank's record (``{run}_rank_R.json``), by rank."""
    started = time.monotonic()
    procs = [
        launch_node(net, rank, tmp_path, secret, machines=machines, run=run, extra=extra)
        for rank in range(machines)
    ]
    codes = wait_all(procs, LAUNCH_TIMEOUT)
    wall = time.monotonic() - started
    logs = "\n".join(
        f"--- node{r} ({run}) ---\n" + log_path(tmp_path, r, run).read_text()[-4000:]
        for r in range(machines)
    )
    assert codes == [0] * machines, f"exit codes {codes} after {wall:.0f} s\n{logs}"
    assert all(not pids for pids in net.pids().values()), f"processes left: {net.pids()}"
    out = tmp_path / "out"
    return [json.loads((out / f"{run}_rank_{r}.json").read_text()) for r in range(machines)]


def trained(ranks: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """Every ``(simulation, time step)`` the ranks trained on, sorted."""
    return sorted((s, t) for r in ranks for batch in r["trained"] for s, t in batch)


@pytest.mark.timeout(180)
@needs_curve
def test_two_nodes_and_their_simulations_in_namespaces(net: netns.Nodes, tmp_path: Path) -> None:
    # each node's loopback is its own: whatever connects below crossed the veths
    for server, client in (("node0", "node1"), ("node0", "sims")):
        assert netns.check_isolation(net, server, client) == {
            "address": "ok",
            "loopback": "ConnectionRefusedError",
        }
    (tmp_path / "workers").mkdir()
    public, secret = zmq.curve_keypair()
    ranks = run_nodes(net, tmp_path, secret.decode())
    assert [r["world_size"] for r in ranks] == [2, 2] and {r["backend"] for r in ranks} == {"gloo"}
    # exactly once across the ranks; step t of simulation s went to rank (s + t) % 2 (the
    # routing the rendezvous advertises: docs/protocol.md section 3)
    seen = [tuple(k) for r in ranks for k in r["seen"]]
    assert sorted(seen) == STUDY and trained(ranks) == STUDY
    assert all((s + t) % 2 == r["rank"] for r in ranks for s, t in r["seen"])
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


@pytest.mark.timeout(300)
@needs_curve
def test_two_nodes_stopped_after_a_checkpoint_resume_on_one_node(
    net: netns.Nodes, tmp_path: Path
) -> None:
    """The same study on node0 and node1, stopped at `FIRST_STEPS` (``--max_steps``:
    a checkpoint of that step at the end, every rank at the same step, whatever the
    timing), then resumed from ``latest`` on node0 alone, one process, to its end:
    a resize from 2 ranks to 1, across namespaces, the second run starting workers in
    the sims namespace again for the simulations the first did not finish."""
    (tmp_path / "workers").mkdir()
    secret = zmq.curve_keypair()[1].decode()
    first = run_nodes(net, tmp_path, secret, run="first", extra=["--max_steps", str(FIRST_STEPS)])
    assert [(r["world_size"], r["global_step"]) for r in first] == [(2, FIRST_STEPS)] * 2
    assert first[0]["checksums"] == first[1]["checksums"]
    checkpoint = latest_checkpoint(tmp_path / "out" / "checkpoints")
    assert checkpoint is not None and checkpoint.name.endswith(f"-{FIRST_STEPS}")
    assert count_ranks(checkpoint) == 2

    second = run_nodes(
        net, tmp_path, secret, machines=1, run="second",
        extra=["--resume_from_checkpoint", "latest"],
    )  # fmt: skip
    log = log_path(tmp_path, 0, "second").read_text()
    resharded = f"{checkpoint} was written by 2 training ranks, this run has 1: each rank takes"
    assert resharded in log, log[-4000:]
    (resumed,) = second
    assert resumed["world_size"] == 1 and resumed["stream_ended"]
    # FIFO, one rank at the end: every (simulation, step) trained exactly once in the
    # lineage, the first run's steps (all before its checkpoint) then the second's
    assert trained(first + second) == STUDY, (trained(first), trained(second))
    steps = [s for s, _ in resumed["checksums"]]
    assert steps == list(range(FIRST_STEPS + 1, resumed["global_step"] + 1))
    assert len(resumed["trained"]) == len(steps)  # one micro-batch a step
    assert resumed["launcher"]["finished"] == SIMULATIONS
