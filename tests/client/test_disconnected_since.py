"""Since when a close says a killed receiver is disconnected. A user trial (htrial14,
kill_client.sh): a trainer SIGKILLed while its client kept computing and sending; the
close's notice said "disconnected since" the time the close began (the monitor, read
only by a wait, was first read then), and its "(N s)" and "waits up to M s more
(disconnected_timeout=...)" did not add up. Now `Handshakes` dates the disconnection
back by the reconnection intervals ZeroMQ announced since (all but the last): the kill
time within one interval (RECONNECT_IVL plus its jitter, at most twice it), and the
messages say how much of it the close counted. Before the change `down_since` was the
read time, a whole `COMPUTE` later.

The receiver is a ZeroMQ PULL socket in a subprocess (so that it can be killed)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Client, ClientTuning

FIELDS = {"u": ((4,), "float32")}
#: what the solver computes between its last send and its close, the trainer killed
#: meanwhile: the time the monitor is not read (the scenario, not a synchronisation)
COMPUTE = 3.0
RECEIVER = (
    "import sys, zmq\n"
    "s = zmq.Context().socket(zmq.PULL)\n"
    "print(s.bind_to_random_port('tcp://127.0.0.1'), flush=True)\n"
    "sys.stdin.read()\n"  # (until killed)
)


@pytest.fixture
def receiver() -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield proc, f"tcp://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_disconnection_is_dated_from_the_kill_not_from_the_read(
    receiver: tuple[subprocess.Popen[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    proc, endpoint = receiver
    tuning = ClientTuning(disconnected_timeout=2.0, close_timeout=30, replay_bytes=0)
    client = Client(FIELDS, simulation_id=3, endpoints=endpoint, tuning=tuning)
    handshakes = client._transport.handshakes  # (its one reader: the client's thread)
    try:
        client.send(0, u=np.ones(4, np.float32))
        assert handshakes.wait([endpoint], time.monotonic() + 30) is None
        assert handshakes.accepted()  # (connected: the kill disconnects it)
        ivl = client._transport.sockets[0].reconnect_ivl / 1000
        kill_sent = time.monotonic()  # (the disconnection is not before it)
        proc.kill()
        proc.wait(timeout=60)
        killed = time.monotonic()  # (on a busy machine, maybe well after the disconnection)
        threading.Event().wait(COMPUTE)  # (the solver computes: nothing reads the monitor)
        handshakes.read()
        read = time.monotonic()
        since = handshakes.down_since[0]
        assert since is not None
        # within one announced interval (at most 2 RECONNECT_IVL) of the kill, with the
        # latency of the kill's RST, on a quiet machine; on a busy one ZeroMQ's attempts
        # come late and the dating errs later by their delays: half the time unread is
        # allowed (before the change: `read`, COMPUTE s later, the whole of it)
        late = max(2 * ivl + 0.05, (read - killed) / 2)
        assert kill_sent - 0.05 <= since <= killed + late, (since - killed, read - killed)
        with (
            caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"),
            pytest.raises(TimeoutError) as caught,
        ):
            client.close()
    finally:
        client.close(bye=False)
    notices = [r.getMessage() for r in caplog.records if "is disconnected since" in r.getMessage()]
    assert len(notices) == 1, caplog.text
    # "(N s, M s of them in this wait: ...) ... waits up to L s more (...=2.0 s)": M + L = 2
    found = re.search(
        r"\((\d+) s, (\d+) s of them in this wait: .* waits up to (\d+) s more "
        r"for it to reconnect \(ClientTuning.disconnected_timeout=2.0 s\)",
        notices[0],
    )
    assert found, notices[0]
    total, counted, left = (int(g) for g in found.groups())
    assert total >= counted + COMPUTE / 2 - 0.5 and abs(counted + left - 2) <= 1, notices[0]
    said = str(caught.value)
    found = re.search(
        r"disconnected for (\d+) s without a new connection \(disconnected_timeout=2.0 s, "
        r"counted from this wait's start (\d+) s ago;",
        said,
    )
    assert found and int(found[1]) >= int(found[2]) + 1, said
