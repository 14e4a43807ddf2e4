"""A worker reports a simulation finished only once its receivers ingested its BYE.

In worker mode the process lives on after a simulation's `Client.close`, and reports it
finished with its next request: a worker SIGKILLed right after that report took the
simulation's last steps and BYE with it when they were still in its ZeroMQ context's
I/O thread (CI: 1 of 5 steps arrived; the launcher found it incomplete and ran it
again). Its close now asks for the BYE's receipt, as external mode's does
(`melissa_trainer.client.confirm`).

A real worker process (`serve_simulations`) streams to a real receiver whose buffer
(2 samples) is full until its follow socket has answered a RECEIPT_QUERY: its ingester
cannot take the BYE before. A stand-in launcher (this test's REP socket) SIGKILLs the
worker as soon as the report arrives, and reads the receiver's record. Before the fix
the report came with the BYE unread (the receiver had 2 of 5 steps, simulation 0 not
complete) and the killed worker never sent it again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.worker import PROTOCOL_VERSION

WORKER = """
import sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.worker import serve_simulations

TUNING = ClientTuning(close_timeout=float(sys.argv[1]))

def run(simulation_id, parameters, context):
    with Client(simulation_id=simulation_id, fields={"u": ((4,), np.float64)},
                context=context, tuning=TUNING) as client:
        for t in range(5):
            client.send(t, u=np.full(4, t, np.float64))

serve_simulations(run, timeout=60.0)
"""


def worker_env(rendezvous: Path, launcher: zmq.Socket) -> dict[str, str]:
    """A worker's environment: endpoints from `rendezvous`, `launcher` its launcher."""
    env = {
        **os.environ,
        "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous),
        "MELISSA_TRAINER_LAUNCHER": launcher.getsockopt_string(zmq.LAST_ENDPOINT),
        "MELISSA_TRAINER_WORKER": "worker-0",
    }
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        env.pop(name, None)
    return env


def give_simulation_0(launcher: zmq.Socket) -> None:
    """Answer the worker's first request (it reports nothing yet) with simulation 0."""
    assert launcher.poll(60_000), "the worker never asked for a simulation"
    assert json.loads(launcher.recv())["finished"] is None
    given = {"simulation_id": 0, "parameters": {}, "attempt": 0}
    launcher.send(json.dumps({"version": PROTOCOL_VERSION, **given}).encode())


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_worker_killed_right_after_its_report_leaves_the_simulation_complete(
    tmp_path: Path,
) -> None:
    buffer = FIFOBuffer(2)
    context = zmq.Context()
    launcher = context.socket(zmq.REP)
    launcher.setsockopt(zmq.LINGER, 0)
    launcher.bind("tcp://127.0.0.1:*")
    env = worker_env(tmp_path, launcher)
    stop = threading.Event()
    with running(buffer=buffer, rendezvous_dir=tmp_path, run_id="run-a") as receiver:
        follow = receiver._follow
        assert follow is not None

        def drain() -> None:  # (the trainer takes samples once a receipt was asked for)
            while not stop.is_set() and follow.answered < 1:
                stop.wait(0.005)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    buffer.get_batch(1, timeout=0.05)

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        worker = subprocess.Popen([sys.executable, "-c", WORKER, "1800"], env=env)
        try:
            give_simulation_0(launcher)
            assert launcher.poll(60_000), "the worker never reported simulation 0"
            report = json.loads(launcher.recv())
            worker.send_signal(signal.SIGKILL)  # right after the report: never answered
            worker.wait(30)
            assert report["finished"] == 0 and "exit_code" not in report, report
            # the receiver's record, as the launcher would read it now: complete
            # (before: [], 2 of the 5 steps ingested, the BYE never came)
            done = receiver.completed()
            assert 0 in done or 0 in receiver.ingest.sims[0].byes, (done, receiver.telemetry())
        finally:
            stop.set()
            if worker.poll() is None:
                worker.kill()
                worker.wait(30)
            drainer.join(30)
            launcher.close(linger=0)
            context.term()


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_bye_never_confirmed_is_never_reported_finished(tmp_path: Path) -> None:
    # the receiver's buffer stays full (nobody trains): it answers "not yet" without
    # progress, the close gives up after close_timeout (1 s), raises TimeoutError, and
    # the worker ends (exit 1) without reporting simulation 0 finished: the launcher
    # counts a failed attempt and runs it again
    context = zmq.Context()
    launcher = context.socket(zmq.REP)
    launcher.setsockopt(zmq.LINGER, 0)
    launcher.bind("tcp://127.0.0.1:*")
    with running(buffer=FIFOBuffer(2), rendezvous_dir=tmp_path, run_id="run-a") as receiver:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, "1.0"], env=worker_env(tmp_path, launcher),
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            give_simulation_0(launcher)
            _, stderr = worker.communicate(timeout=60)
            assert worker.returncode == 1, stderr
            assert "TimeoutError" in stderr and "simulation 0" in stderr, stderr
            assert not launcher.poll(0)  # no report: neither finished nor failed
            assert 0 not in receiver.completed()
            assert receiver._follow is not None and receiver._follow.answered >= 1
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(30)
            launcher.close(linger=0)
            context.term()
