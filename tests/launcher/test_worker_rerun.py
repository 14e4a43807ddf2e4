"""Worker mode resumed: a simulation a worker was running at the checkpoint runs again in
a worker of the resumed study, and sends only the steps the checkpoint lacks, as a
launched process does (`melissa_trainer.client.rerun`). The launcher gives the attempt
in its answer to the worker's request (``"attempt"``, 0 the first); the worker's
`Client` asks its receivers what they hold when that attempt is above 0.

A real `Launcher(worker=True)` and worker processes, an in-process receiver: run A's
worker sends the first HALF steps of simulation 0 and hangs; the checkpoint (receiver,
buffer, launcher) is taken; run B resumes from it and its worker sends every step.

The oracle: run B's receiver's counters (duplicates: each step the checkpoint holds that
came again; samples put: the checkpoint's, then each it lacked) and its buffer (every
step once). Before, a worker sent every step again (HALF duplicates, dropped by the
receiver).
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import zmq
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import worker_given
from melissa_trainer.client.worker import PROTOCOL_VERSION, WorkerClient
from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")

STEPS, HALF = 8, 5

#: argv: the run directory. The first simulation it is given (no "hung" file yet) sends
#: HALF steps and hangs (killed by the launcher's stop); any later one sends every step.
WORKER = r"""
import os, sys, time
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

out = sys.argv[1]
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    first = not os.path.exists(os.path.join(out, "hung"))
    client = Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters)
    for t in range(HALF if first else STEPS):
        if not first:
            time.sleep(float(os.environ.get("RERUN_STEP_S", "0")))  # (its compute)
        client.send(t, u=np.full(4, t, np.float32))
    if first:
        client.flush()
        open(os.path.join(out, "hung"), "w").close()
        time.sleep(600)
    client.close()
""".replace("HALF", str(HALF)).replace("STEPS", str(STEPS))


def launcher(tmp_path: Path, timeout: float | str = "auto", step_s: float = 0.0) -> Launcher:
    """The study; `timeout`: its simulation_timeout, `step_s`: a rerun's step time."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    return Launcher(
        [sys.executable, str(script), str(tmp_path)],
        ListSampler([{"x": 0.5}]),
        1,
        job_limit=1,
        worker=True,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, simulation_timeout=timeout),
        log_dir=tmp_path / "logs",
        env={"RERUN_STEP_S": str(step_s)},
    )


def receiver(tmp_path: Path, buffer: FIFOBuffer, run_id: str) -> Receiver:
    config = ReceiverConfig(
        expected_simulations=1, bind="tcp://127.0.0.1:*",
        rendezvous_dir=str(tmp_path / "rendezvous"), run_id=run_id,
    )  # fmt: skip
    return Receiver(buffer, 0, 1, config)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_resumed_worker_study_reruns_a_simulation_sending_only_what_the_checkpoint_lacks(
    tmp_path: Path,
) -> None:
    figures = resumed_worker_study(tmp_path, "auto", 0.0)
    # the oracle: no step the checkpoint holds came again but the first send (step 0: a
    # rerun's first send goes out at once, `rerun`); each one it lacked came
    assert figures["duplicates"] == 1, figures


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_worker_rerun_slower_than_the_silence_bound_sends_signs_of_life(
    tmp_path: Path,
) -> None:
    """``simulation_timeout=4`` (told to the worker: ``MELISSA_TRAINER_SILENCE_S``, a
    sign of life due 1 s after the last send) and a rerun whose steps take 1.2 s: its
    HALF held steps, 6 s, outlast the bound. Each comes after more than the interval
    without a send, so each is sent anyway (a duplicate); the study completes. Before,
    nothing was sent for 6 s and the launcher killed the rerun as hung, every attempt."""
    figures = resumed_worker_study(tmp_path, 4.0, 1.2)
    assert figures["duplicates"] == HALF, figures


def resumed_worker_study(tmp_path: Path, timeout: float | str, step_s: float) -> dict:
    """Run A until its worker hangs after HALF steps, then run B resumed from its
    checkpoint to the end (`launcher`'s `timeout`, `step_s`): run B's receiver's
    telemetry, once every step is checked in its buffer once."""
    buffer = FIFOBuffer(100)
    first = receiver(tmp_path, buffer, "run-a")
    first.start()
    launch = launcher(tmp_path)  # (its hung worker waits for the stop: no timeout)
    try:
        launch.start(tmp_path / "rendezvous")
        wait_until(lambda: buffer.stats().put == HALF, "run A's first steps", 60.0)
        wait_until(lambda: (tmp_path / "hung").exists(), "run A's worker to hang", 60.0)
        # the checkpoint: the launcher's record (simulation 0 running), the receiver's
        state = json.loads(json.dumps(launch.state_dict()))
        record, held = first.state_dict(), buffer.state_dict()
    finally:
        launch.stop()  # (kills run A's worker)
        first.stop()

    buffer = FIFOBuffer(100)
    buffer.load_state_dict(*held)
    second = receiver(tmp_path, buffer, "run-b")
    second.load_state_dict(record)
    second.start()
    launch = launcher(tmp_path, timeout, step_s)
    try:
        launch.load_state_dict(state)
        launch.start(tmp_path / "rendezvous", heartbeat=second.activity)
        samples = drain(buffer, timeout=60.0)
        wait_until(lambda: launch.check() or launch.done, "the study to complete", 60.0)
    finally:
        launch.stop()
        second.stop()
    figures = second.telemetry()
    assert figures["samples_put"] == STEPS, figures  # (the checkpoint's HALF, then the rest)
    assert second.completed() == [0]
    assert sorted(int(s["time_step"]) for s in samples) == list(range(STEPS))  # each once
    return figures


class FakeLauncher:
    """A REP socket answering every worker request with `answer`."""

    def __init__(self, answer: dict[str, object]) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind("tcp://127.0.0.1:*")
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.answer = answer

    def serve_one(self) -> None:
        assert self.socket.poll(10_000), "no worker request"
        self.socket.recv()
        self.socket.send(json.dumps({"version": PROTOCOL_VERSION, **self.answer}).encode())

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [({"attempt": 2}, 2), ({}, 0)],  # (none: a launcher older than the field, attempt 0)
    ids=["given", "older_launcher"],
)
def test_a_worker_keeps_the_attempt_its_launcher_gave(
    monkeypatch: pytest.MonkeyPatch, answer: dict[str, object], expected: int
) -> None:
    monkeypatch.setattr(worker_given, "_given", None)
    fake = FakeLauncher({"simulation_id": 7, "parameters": {"x": 0.5}, **answer})
    client = WorkerClient(fake.endpoint, "worker-0", timeout=10.0)
    try:
        assert worker_given.given_attempt(7) is None  # (nothing given yet)
        fake_thread_reply(fake, client)
        assert client.attempt == expected
        assert worker_given.given_attempt(7) == expected
        assert worker_given.given_attempt(8) is None  # (another simulation: not this one's)
    finally:
        client.close()
        fake.close()


def fake_thread_reply(fake: FakeLauncher, client: WorkerClient) -> None:
    """`client.next_simulation()` answered by `fake` (its REP served from a thread)."""
    server = threading.Thread(target=fake.serve_one)
    server.start()
    try:
        assert client.next_simulation() == (7, {"x": 0.5})
    finally:
        server.join()
