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


def answer(launcher: zmq.Socket, **reply: object) -> None:
    launcher.send(json.dumps({"version": PROTOCOL_VERSION, **reply}).encode())


def next_request(launcher: zmq.Socket) -> dict[str, object]:
    assert launcher.poll(60_000), "the worker sent no request"
    request: dict[str, object] = json.loads(launcher.recv())
    return request


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_bye_never_confirmed_is_reported_failed_and_the_worker_goes_on(
    tmp_path: Path,
) -> None:
    # the receiver's buffer stays full (nobody trains): it answers "not yet" without
    # progress, the close gives up after close_timeout (1 s) with a DeliveryFailed: the
    # worker reports simulation 0 failed (exit code 75), never finished, and takes its
    # next attempt in the same process, its start-up kept (before: it exited 1 and the
    # launcher relaunched it). The trainer then trains: the second attempt is confirmed,
    # the worker exits 0 when told nothing is left (its shared context ends), and each
    # of the simulation's steps was ingested once across both attempts.
    context = zmq.Context()
    launcher = context.socket(zmq.REP)
    launcher.setsockopt(zmq.LINGER, 0)
    launcher.bind("tcp://127.0.0.1:*")
    buffer = FIFOBuffer(2)
    got: list[dict[str, object]] = []
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                got.extend(buffer.get_batch(1, timeout=0.05))

    drainer = threading.Thread(target=drain, daemon=True)
    with running(buffer=buffer, rendezvous_dir=tmp_path, run_id="run-a") as receiver:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, "1.0"], env=worker_env(tmp_path, launcher),
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            give_simulation_0(launcher)
            report = next_request(launcher)
            assert report["finished"] == 0 and report["exit_code"] == 75, report
            assert worker.poll() is None  # the same process asks for more
            assert 0 not in receiver.completed()
            assert receiver._follow is not None and receiver._follow.answered >= 1
            drainer.start()  # the trainer trains now: the second attempt is confirmed
            answer(launcher, simulation_id=0, parameters={}, attempt=1)
            report = next_request(launcher)
            assert report["finished"] == 0 and "exit_code" not in report, report
            answer(launcher, simulation_id=None)
            _, stderr = worker.communicate(timeout=60)
            assert worker.returncode == 0, stderr
            # said once, with what the worker did
            said = [line for line in stderr.splitlines() if "exit code 75" in line]
            assert len(said) == 1 and "did not confirm this simulation's BYE" in said[0], stderr
            assert said[0].startswith("-c: simulation 0 rank 0: "), said  # (named once)
            assert "reports it failed, exit code 75, and goes on" in said[0], stderr
            assert 0 in receiver.completed()
        finally:
            stop.set()
            if worker.poll() is None:
                worker.kill()
                worker.wait(30)
            if drainer.is_alive():
                drainer.join(30)
            launcher.close(linger=0)
            context.term()
    while len(buffer):  # (what the drainer left)
        got.extend(buffer.get_batch(1, timeout=0))
    assert sorted(int(s["time_step"]) for s in got) == list(range(5)), got  # type: ignore[call-overload]
