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
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="SIGSTOP"),
]

STEPS = 12

#: The trainer's receiving side: publishes its rendezvous (argv[1]), says "ready", reads
#: nothing from its FIFO until a line comes on stdin, then prints "key SIM STEP" per
#: sample and "end" when the stream ended (one simulation expected).
RECEIVER = """
import sys
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

buffer = FIFOBuffer(2)
config = ReceiverConfig(expected_simulations=1, rendezvous_dir=sys.argv[1], run_id="run-p")
receiver = Receiver(buffer, 0, 1, config)
receiver.start()
try:
    print("ready", flush=True)
    sys.stdin.readline()  # (the test's go: the BYE stays unread until then)
    while True:
        try:
            batch = buffer.get_batch(1, timeout=0.1)
        except TimeoutError:
            continue
        if not batch:
            break
        for sample in batch:
            print("key", int(sample["simulation_id"]), int(sample["time_step"]), flush=True)
    print("end", flush=True)
finally:
    receiver.stop()
"""


def established(port: int) -> bool:
    """Whether the kernel has a TCP connection to local port `port` (IPv4)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
            return True
    return False


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
def trainer(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # (a stopped process dies only once continued)
            proc.kill()
        proc.communicate(timeout=60)


@pytest.mark.timeout(120)
def test_a_close_waits_for_a_paused_trainer_and_loses_nothing(
    trainer: subprocess.Popen[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    failed: list[BaseException] = []

    def close() -> None:
        try:
            client.close()
        except BaseException as exc:  # noqa: BLE001 - the test's oracle
            failed.append(exc)

    closing = threading.Thread(target=close, name="closing", daemon=True)
    closing.start()
    # many times both timeouts: a close that took the paused trainer for a dead one
    # has failed by now (before the receipt, it had returned with its BYE unread)
    closing.join(timeout=5.0)
    assert not failed, failed
    assert closing.is_alive(), "the close returned while the trainer was stopped"
    os.kill(trainer.pid, signal.SIGCONT)
    assert trainer.stdin is not None
    trainer.stdin.write("go\n")
    trainer.stdin.flush()
    closing.join(timeout=60)
    assert not closing.is_alive() and not failed, failed
    out, _ = trainer.communicate(timeout=60)
    lines = out.splitlines()
    assert lines[-1:] == ["end"], lines[-5:]
    keys = [(int(w[1]), int(w[2])) for w in (line.split() for line in lines[:-1])]
    assert sorted(keys) == [(4, t) for t in range(STEPS)]
    assert trainer.returncode == 0
