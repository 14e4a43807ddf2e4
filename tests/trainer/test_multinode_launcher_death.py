"""One node's ``accelerate launch`` killed (``kill -9``) or preempted (SIGTERM) while two
nodes train (network namespaces, as tests/trainer/test_multinode.py, whose set-up this
reuses): node 1's launcher, and node 0's, which also hosts torch elastic's store and
whose rank runs the study's launcher. Every rank stops at the same step with a
checkpoint; a launcher's death is named on every node with its pid and node; both
launches exit non-zero on their own (none hangs); nothing is left running in any
namespace; and a resume on the same two nodes trains every ``(simulation, time step)``
exactly once across both runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import netns
import pytest
import zmq
from test_multinode import STEPS, launch_node, log_path, run_nodes, trained, wait_all
from test_multinode import net as net  # (the fixture: namespaces made, then deleted)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE"),
]

SIMULATIONS = 16
#: every (simulation, time step) of this study
STUDY = [(s, t) for s in range(SIMULATIONS) for t in range(STEPS)]
#: seconds between two time steps a worker sends: the study outlasts the stop
PACE = "0.1"
#: the launches' own bound after the signal, inside the test's timeout
STOP_TIMEOUT = 120.0


def _wait_for(paths: list[Path], procs: list[subprocess.Popen]) -> None:
    """Until every path exists (pytest-timeout bounds it); fails if a launch exits first."""
    while not all(p.exists() for p in paths):
        assert all(p.poll() is None for p in procs), [p.poll() for p in procs]
        time.sleep(0.1)


def _kill_while_training(
    net: netns.Nodes,
    tmp_path: Path,
    secret: str,
    study: list[str],
    node: int,
    signum: int,
    rank_too: bool = False,
) -> tuple[int, list[int | None], list[str]]:
    """Run "first" on both nodes; once both ranks trained a step, `signum` to node
    `node`'s launcher (and SIGKILL to its rank, `rank_too`: the node lost); wait up to
    `STOP_TIMEOUT` for both launches (then SIGKILL what is left). Returns the launcher's
    pid, both launches' exit codes (None: killed at the bound) and both logs."""
    (tmp_path / "workers").mkdir()
    out = tmp_path / "out"
    procs = [launch_node(net, r, tmp_path, secret, run="first", extra=study) for r in (0, 1)]
    try:
        _wait_for([out / f"first_training_{r}" for r in (0, 1)], procs)
        os.kill(procs[node].pid, signum)  # (ip netns exec execs: the launcher's own pid)
        if rank_too:
            os.kill(int((out / f"first_training_{node}").read_text()), signal.SIGKILL)
        codes = wait_all(procs, STOP_TIMEOUT)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    return procs[node].pid, codes, [log_path(tmp_path, r, "first").read_text() for r in (0, 1)]


@pytest.mark.timeout(420)
@pytest.mark.parametrize(
    ("node", "signum"),
    [(1, signal.SIGKILL), (0, signal.SIGKILL), (1, signal.SIGTERM), (0, signal.SIGTERM)],
    ids=["kill-9-node1", "kill-9-node0-store-host", "sigterm-node1", "sigterm-node0"],
)
def test_one_nodes_launcher_stopped(
    net: netns.Nodes, tmp_path: Path, node: int, signum: int
) -> None:
    """`signum` to node `node`'s launcher once both ranks trained a step: both launches
    end non-zero within `STOP_TIMEOUT`, both ranks say the cause and the one step they
    stopped at, its checkpoint is there, and the resume trains the rest exactly once."""
    secret = zmq.curve_keypair()[1].decode()
    study = ["--simulations", str(SIMULATIONS), "--pace", PACE]
    out = tmp_path / "out"
    pid, codes, logs = _kill_while_training(net, tmp_path, secret, study, node, signum)
    tails = "\n".join(f"--- node{r} ---\n{logs[r][-5000:]}" for r in (0, 1))
    assert None not in codes and 0 not in codes, f"exit codes {codes}\n{tails}"
    assert all(not pids for pids in net.pids().values()), f"processes left: {net.pids()}"
    # every rank stopped at one step, with its checkpoint, and says why
    cause = (
        f"the launcher \\(accelerate launch, pid {pid}\\) of node {node} is gone"
        if signum == signal.SIGKILL
        else f"SIGTERM on node {node}"
    )
    said = [
        re.findall(rf"{cause}: rank {r} stopped at step (\d+), as every rank; its checkpoint", log)
        for r, log in enumerate(logs)
    ]
    assert all(len(s) == 1 for s in said) and said[0] == said[1], f"{said}\n{tails}"
    step = int(said[0][0])
    assert (out / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").is_file()

    second = run_nodes(
        net, tmp_path, secret, run="second",
        extra=[*study, "--resume_from_checkpoint", "latest"],
    )  # fmt: skip
    first = [run_record(out, "first", r) for r in (0, 1)]
    assert [r["global_step"] for r in first] == [step, step]
    assert trained(first + second) == STUDY, (trained(first), trained(second))
    assert all(r["stream_ended"] for r in second)


@pytest.mark.timeout(240)
def test_a_node_lost_ends_the_other(net: netns.Nodes, tmp_path: Path) -> None:
    """Node 1 lost (its launcher and its rank killed -9; no stop agreement can be had):
    node 0's rank learns it at its next collective (gloo: connection closed by the peer),
    says that another rank is gone, stops the simulations and exits; its launch exits
    non-zero within `STOP_TIMEOUT`; nothing is left running."""
    secret = zmq.curve_keypair()[1].decode()
    study = ["--simulations", str(SIMULATIONS), "--pace", PACE]
    _, codes, logs = _kill_while_training(net, tmp_path, secret, study, 1, signal.SIGKILL, True)
    tail = logs[0][-5000:]
    assert codes[0] not in (0, None) and codes[1] == -signal.SIGKILL, f"{codes}\n{tail}"
    assert all(not pids for pids in net.pids().values()), f"processes left: {net.pids()}"
    assert re.search(r"rank 0 stopped at step \d+: another rank is gone", logs[0]), tail


def run_record(out: Path, run: str, rank: int) -> dict[str, Any]:
    """Rank `rank`'s record of run `run` (tests/scripts/multinode_train.py)."""
    return json.loads((out / f"{run}_rank_{rank}.json").read_text())
