"""`Launcher.summary()['startup_seconds']` on a loaded machine: a simulation's start-up
is measured from its launch to its first message as the receiver timed that message,
not from the launcher thread's ticks, which come late when the machine is loaded.

The oracle: the solver sends its first message only once the test opens a FIFO
(`gate`), after the test has noted the time; the launcher's thread is held (inside its
heartbeat call, as a busy machine would delay it) from before the gate opens until the
message has arrived. Its start-up is at least gate time minus launch time, and at most
the time the test saw the message minus launch time."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses a FIFO and PDEATHSIG"),
    pytest.mark.e2e,
]

#: connects, waits for the test's gate (a FIFO it opens for reading: blocks until the
#: test writes), then sends one step
SOLVER = r"""
import sys
import numpy as np
from melissa_trainer.client import Client

client = Client({"u": ((4,), "float32")})
with open(sys.argv[1]) as gate:
    gate.read()
client.send(0, u=np.zeros(4, np.float32))
client.close()
"""


class HeldHeartbeat:
    """The receiver's heartbeat, whose next call blocks while `hold` is set: the
    launcher's thread held up, as on a loaded machine."""

    def __init__(self, beat: Callable[[], Mapping[int, int]]) -> None:
        self.beat = beat
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> Mapping[int, int]:
        if self.hold.is_set():
            self.entered.set()
            self.release.wait(60)
        return self.beat()


@pytest.mark.timeout(120)
def test_startup_seconds_is_launch_to_first_message_when_the_launcher_thread_is_late(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    script = tmp_path / "solver.py"
    script.write_text(textwrap.dedent(SOLVER))
    buffer = FIFOBuffer(10)
    config = ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    heartbeat = HeldHeartbeat(receiver.activity)
    launch = Launcher(
        [sys.executable, str(script), str(gate)],
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        1,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    try:
        launch.start(
            tmp_path / "rendezvous",
            heartbeat=heartbeat,
            abandon=lambda sid: None,
            data=receiver,
            study_dir=tmp_path / "study",
        )
        supervisor = launch._supervisor
        assert supervisor is not None
        wait_until(lambda: bool(supervisor.jobs), "the simulation's launch")
        (job,) = supervisor.jobs.values()
        sid, launched = job.simulation_id, job.since
        assert sid is not None
        heartbeat.hold.set()
        assert heartbeat.entered.wait(60), "the launcher's thread did not tick"
        opened = time.monotonic()  # the solver's first message comes after this
        with open(gate, "w") as go:  # (blocks until the solver opens it)
            go.write("go")
        wait_until(lambda: receiver.activity().get(sid, 0) > 0, "the first message")
        seen = time.monotonic()  # ... and before this
        heartbeat.release.set()
        assert len(drain(buffer, timeout=60)) == 1
        wait_until(lambda: launch.check() is None and launch.done, "the study's end")
        summary = launch.summary()
        startup = summary["startup_seconds"]
        # (the poll-timed figure stops at the last tick before the hold: under the bound)
        assert opened - launched <= startup <= seen - launched, (opened, startup, seen)
        assert summary["rerun_startup_seconds"] == 0.0  # a first attempt: no rerun's
    finally:
        heartbeat.release.set()
        launch.stop()
        receiver.stop()
