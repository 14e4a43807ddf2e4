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
    (tmp_path / "workers").mkdir()
    secret = zmq.curve_keypair()[1].decode()
    study = ["--simulations", str(SIMULATIONS), "--pace", PACE]
    out = tmp_path / "out"
    procs = [launch_node(net, r, tmp_path, secret, run="first", extra=study) for r in (0, 1)]
    try:
        _wait_for([out / f"first_training_{r}" for r in (0, 1)], procs)
        os.kill(procs[node].pid, signum)  # (ip netns exec execs: the launcher's own pid)
        codes = wait_all(procs, STOP_TIMEOUT)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    logs = [log_path(tmp_path, r, "first").read_text() for r in (0, 1)]
    tails = "\n".join(f"--- node{r} ---\n{logs[r][-5000:]}" for r in (0, 1))
    assert None not in codes and 0 not in codes, f"exit codes {codes}\n{tails}"
    assert all(not pids for pids in net.pids().values()), f"processes left: {net.pids()}"
    # every rank stopped at one step, with its checkpoint, and says why
    cause = (
        f"the launcher \\(accelerate launch, pid {procs[node].pid}\\) of node {node} is gone"
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


def run_record(out: Path, run: str, rank: int) -> dict[str, Any]:
    """Rank `rank`'s record of run `run` (tests/scripts/multinode_train.py)."""
    return json.loads((out / f"{run}_rank_{rank}.json").read_text())
