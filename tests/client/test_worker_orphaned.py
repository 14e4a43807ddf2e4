"""A worker whose launcher is gone says so, and ends, when a simulation is not delivered.

A worker the launcher started through a process of its own (a shell script that forks
the solver; or any worker where no parent-death signal reaches it) outlives a trainer
killed -9: the shell gets the signal, the solver is orphaned. Its client then gives up
on the trainer (`DeliveryFailed`), and the worker used to say "the launcher runs it
again" and ask that launcher for the next simulation, waiting its request's `timeout`
for an answer that never came, then ending on a TimeoutError. Now `serve_simulations`
sees that the process that started it has ended (`worker_launcher.parent_gone`), says
what runs the simulation again (a resumed run) and ends at once, unreported.

Real processes: this test's stand-in launcher (a REP socket) gives simulation 0 to a
worker started by an intermediate process, killed -9 first; the worker's client streams
to a port where no receiver listens (127.0.0.1:1 refuses every connection), so its
close gives up after its `close_timeout`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest
import zmq

from melissa_trainer.client.worker import PROTOCOL_VERSION

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reparenting as Linux does it"),
    pytest.mark.e2e,
]

WORKER = """
import numpy as np
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.worker import serve_simulations

def run(simulation_id, parameters, context):
    with Client({"u": ((4,), "float32")}, simulation_id=simulation_id,
                endpoints="tcp://127.0.0.1:1", context=context,
                tuning=ClientTuning(close_timeout=0.5)) as client:
        client.send(0, u=np.zeros(4, np.float32))

serve_simulations(run, timeout=5.0)
"""

#: the worker's parent (the launcher's job, a wrapper): starts the worker (argv[1:]),
#: prints its pid, and waits to be killed
PARENT = """
import subprocess, sys
worker = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
print(worker.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(120)
def test_an_orphaned_worker_says_a_resumed_run_runs_its_simulation_and_ends() -> None:
    context = zmq.Context()
    launcher = context.socket(zmq.REP)
    launcher.setsockopt(zmq.LINGER, 0)
    launcher.bind("tcp://127.0.0.1:*")
    env = {
        **os.environ,
        "MELISSA_TRAINER_LAUNCHER": launcher.getsockopt_string(zmq.LAST_ENDPOINT),
        "MELISSA_TRAINER_WORKER": "worker-0",
    }
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RENDEZVOUS"):
        env.pop(name, None)
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, sys.executable, "-c", WORKER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, text=True,
    )  # fmt: skip
    assert parent.stdout is not None and parent.stderr is not None
    worker_pid, ended = int(parent.stdout.readline()), False
    try:
        assert launcher.poll(60_000), "the worker never asked for a simulation"
        assert json.loads(launcher.recv())["finished"] is None
        parent.kill()  # (as a trainer killed -9 takes its job's wrapper with it)
        parent.wait(30)  # (reaped: the worker was reparented before, at its exit)
        given = {"simulation_id": 0, "parameters": {}, "attempt": 0}
        launcher.send(json.dumps({"version": PROTOCOL_VERSION, **given}).encode())
        stderr = parent.stderr.read()  # (the worker's: until it exits and closes it)
        ended = True
        # ended without reporting simulation 0 to a launcher that is gone
        assert not launcher.poll(0), "the worker reported to its launcher gone"
        said = [line for line in stderr.splitlines() if "simulation 0 rank 0" in line]
        assert len(said) == 1, stderr
        assert said[0].startswith("melissa_trainer.client.worker_launcher.LauncherGone: "), said
        assert "started this worker (pid " in said[0] and ") ended" in said[0], said
        assert "--resume_from_checkpoint latest" in said[0], said
        assert said[0].endswith("the resumed run runs simulation 0 again."), said
        assert "the launcher runs it again" not in stderr, stderr
    finally:
        parent.kill()
        parent.wait(30)
        if not ended:  # (a worker left by a failure: ours, by its pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker_pid, signal.SIGKILL)
        launcher.close(linger=0)
        context.term()
