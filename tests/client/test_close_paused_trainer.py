"""An external-mode close (docs/protocol.md, section 17b) while the trainer is paused.

A trainer stopped by SIGSTOP (a suspended job, a debugger) keeps its connections: the
kernel holds them, nothing is read. A closing solver asks the receipt of its BYE and
gets no answer; it must wait, as for a busy trainer, and not take the silence for a
trainer gone (which, with no trainer restarted within `follow_timeout`, fails the close
with a `TimeoutError` saying to run the simulation again). The receiving side is a real
`Receiver` publishing a rendezvous, in a process of its own (so that it can be stopped),
with a FIFO of 2 samples drained only once the test says so: the BYE waits unread in its
queue while the process is stopped. The oracle: the close neither fails nor returns
while the trainer is stopped, returns once it is continued, and the receiver's own
record (printed by its process) holds every step exactly once.

The close tells a paused trainer from a gone one by its follow socket's TCP connection
(a ZeroMQ monitor's CONNECTED event, `melissa_trainer.client.receipts`). A monitor
attached after `connect` misses that event when the connection was quicker (loopback,
a busy machine): the paused trainer was then taken for a dead one (htrial, 2026-11-30,
a busy 2-core machine: without the forcing below, 3 of 5 runs of this test failed so,
and 2 of 21 of the same steps as a script). The test makes that order certain rather than
likely: a monitor asked for on a socket already connected to the follow endpoint is
attached only once the kernel has the connection (`/proc/net/tcp`); a client that
attaches its monitor before connecting is not delayed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from keys_receiver_process import ReceiverProcess, closing, established

from melissa_trainer.client import Client, ClientTuning

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP"),
]

STEPS = 12


def monitor_after_the_connection(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """A monitor asked for on a socket connected to `endpoint` is attached only once the
    connection is made (what a busy machine does by chance)."""
    port = int(endpoint.rsplit(":", 1)[1])
    connected: set[int] = set()
    connect, get_monitor_socket = zmq.Socket.connect, zmq.Socket.get_monitor_socket

    def connecting(self: zmq.Socket, addr: str) -> object:
        if addr == endpoint:
            connected.add(id(self))
        return connect(self, addr)

    def monitored(self: zmq.Socket, *args: object, **kwargs: object) -> zmq.Socket:
        if id(self) in connected:
            deadline = time.monotonic() + 30.0
            while not established(port):  # (the kernel's table: no event to wait on)
                assert time.monotonic() < deadline, f"no TCP connection to {endpoint}"
                time.sleep(0.005)
        return get_monitor_socket(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zmq.Socket, "connect", connecting)
    monkeypatch.setattr(zmq.Socket, "get_monitor_socket", monitored)


@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[ReceiverProcess]:
    """The trainer's receiving side (`keys_receiver_process`): publishes its rendezvous in
    `tmp_path`, reads nothing from its FIFO of 2 until the test's go (`go`), then reads
    one sample at a time (one simulation expected)."""
    options = ["--rendezvous", str(tmp_path), "--run_id", "run-p", "--fifo", "2"]
    proc = ReceiverProcess(*options, "--batch", "1", "--on_stdin")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.timeout(120)
def test_a_close_waits_for_a_paused_trainer_and_loses_nothing(
    trainer: ReceiverProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))  # (a solver run by hand)
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    # short enough that a close taking the pause for a trainer gone fails within the wait
    # below: 0.2 s disconnected, then 0.2 s for a restarted trainer to publish
    tuning = ClientTuning(disconnected_timeout=0.2, follow_timeout=0.2)
    client = Client(simulation_id=4, fields={"u": ((4,), np.float64)}, tuning=tuning)
    for t in range(STEPS):
        client.send(t, u=np.full(4, t, np.float64))
    client.flush()
    follow = json.loads((tmp_path / "rank_0.json").read_text())["follow_endpoint"]
    monitor_after_the_connection(monkeypatch, follow)
    os.kill(trainer.pid, signal.SIGSTOP)
    thread, failed = closing(client)
    # many times both timeouts: a close that took the paused trainer for a dead one
    # has failed by now (before the receipt, it had returned with its BYE unread)
    thread.join(timeout=5.0)
    assert not failed, failed
    assert thread.is_alive(), "the close returned while the trainer was stopped"
    os.kill(trainer.pid, signal.SIGCONT)
    trainer.go()
    thread.join(timeout=60)
    assert not thread.is_alive() and not failed, failed
    assert sorted(trainer.keys()) == [(4, t) for t in range(STEPS)]  # (it ended, exit 0)
