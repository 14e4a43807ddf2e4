"""The receiver and peers that stall or vanish: raw TCP peers (`zmtp_peer`: no ZeroMQ on
their side) that complete the ZMTP 3.1 NULL handshake as PUSH sockets, announce a 512 MiB
frame, send 96 MiB of it and stall: killed, or with their host gone (a network namespace;
TCP keepalive), their connection is closed and the receiver's memory comes back, while a
`Client` streaming meanwhile gets every step into the buffer. A peer that never completes
the handshake is dropped.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import drain, running
from waiting import wait_until
from zmtp_peer import closed_by_peer, rss

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream import liveness

SENT = 96  # MiB a stalled peer sends of the frame it announced (zmtp_peer.ANNOUNCED)


FREED = 64 << 20  # RSS must come back by at least this much (SENT, less noise)


PEER = str(Path(__file__).parents[1] / "zmtp_peer.py")


def stream_one_simulation(endpoint: str, steps: int, errors: list[BaseException]) -> None:
    try:
        fields = {"u": ((8,), "float32")}
        with Client(
            fields, {"p": 1.0}, 1, [endpoint], tuning=ClientTuning(batch_bytes=0)
        ) as client:
            for t in range(steps):
                client.send(t, u=np.full(8, t, np.float32))
                time.sleep(0.005)  # a simulation's pace: the stream spans the stall
    except BaseException as exc:  # re-raised by the test
        errors.append(exc)


def check_one_simulation(samples: list[dict[str, np.ndarray]], steps: int) -> None:
    assert sorted(int(s["time_step"]) for s in samples) == list(range(steps))
    assert all(np.array_equal(s["u"], np.full(8, s["time_step"], np.float32)) for s in samples)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_peer_killed_mid_frame_frees_its_memory_and_others_are_served() -> None:
    """A live peer that stalls mid-frame keeps what it sent (one frame at most); killed
    (kill -9), its kernel closes the connection and the receiver's memory comes back,
    while a `Client` streams a simulation whose every step reaches the buffer."""
    buffer, steps = FIFOBuffer(1000), 600
    errors: list[BaseException] = []
    with running(buffer, expected_simulations=1) as rec:
        assert rec.endpoint is not None
        base = rss()
        peer = subprocess.Popen(
            [sys.executable, PEER, rec.endpoint, str(SENT)], stdout=subprocess.PIPE, text=True
        )
        client = threading.Thread(target=stream_one_simulation, args=(rec.endpoint, steps, errors))
        try:
            assert peer.stdout is not None and peer.stdout.readline() == "stalled\n"
            client.start()
            wait_until(lambda: rss() - base > FREED, "the partial frame in memory", 30)
            peak, served = rss(), rec.telemetry()["messages"]
            # the receiver goes on serving the client (100 messages, half a second of its
            # stream) while the stalled peer's partial frame stays in memory
            wait_until(lambda: rec.telemetry()["messages"] >= served + 100, "the client", 30)
            assert peer.poll() is None and rss() > peak - FREED // 2  # kept while it lives
            peer.kill()
            peer.wait(10)
            wait_until(lambda: rss() < peak - FREED, "the partial frame freed", 30)
            client.join(60)
            assert not client.is_alive() and not errors, errors
            samples = drain(buffer)
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait(10)
            if peer.stdout is not None:
                peer.stdout.close()
            if client.ident is not None:
                client.join(10)
    check_one_simulation(samples, steps)
    assert rec.telemetry()["rejected"] == 0 and rec.finished_simulations() == [1]


VANISHED_HOST = r"""
import json, subprocess, sys, threading, time
sys.path[:0] = sys.argv[2].split(":")  # tests/ (helpers, zmtp_peer), tests/stream/ (this file)
import zmq
from helpers import drain
from zmtp_peer import closed_by_peer, rss
from test_receiver_stalled_peers import check_one_simulation, stream_one_simulation
from zmtp_peer import closed_by_peer, rss, stall_mid_frame, zmtp_push_peer
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import liveness, receiver_socket  # (where the socket is set up)
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

subprocess.run("ip link set lo up".split(), check=True)
for address in ("10.7.0.1", "10.7.0.2"):  # the receiver's host, the peer's host
    subprocess.run(f"ip addr add {address}/32 dev lo".split(), check=True)
if sys.argv[1] == "keepalive":  # as set, but probing after 1 s, twice, 1 s apart
    liveness.KEEPALIVE_IDLE, liveness.KEEPALIVE_INTERVAL, liveness.KEEPALIVE_COUNT = 1, 1, 2
else:  # the control: the socket options without keepalive
    options = liveness.socket_options
    receiver_socket.socket_options = lambda n: {
        k: v for k, v in options(n).items() if k != zmq.TCP_KEEPALIVE
    }
buffer, steps, errors = FIFOBuffer(1000), 600, []
config = ReceiverConfig(expected_simulations=1, bind="tcp://0.0.0.0:*", advertise_host="127.0.0.1")
rec = Receiver(buffer, config=config)
rec.start()
port = rec.endpoint.rsplit(":", 1)[1]
base = rss()
peer = zmtp_push_peer(f"tcp://10.7.0.1:{port}", source="10.7.0.2")
stall_mid_frame(peer, int(sys.argv[3]) << 20)
deadline = time.monotonic() + 30
while rss() - base < (64 << 20) and time.monotonic() < deadline:
    time.sleep(0.01)
held = rss() - base
client = threading.Thread(target=stream_one_simulation, args=(rec.endpoint, steps, errors))
client.start()
# the peer's host vanishes: its address is gone, nothing answers the receiver's probes
subprocess.run("ip addr del 10.7.0.2/32 dev lo".split(), check=True)
deadline = time.monotonic() + float(sys.argv[4])
while rss() - base > held // 4 and time.monotonic() < deadline:
    time.sleep(0.05)
left = rss() - base
client.join(60)
samples = drain(buffer)
check_one_simulation(samples, steps)
rec.stop()
print(json.dumps({"held": held, "left": left, "errors": [repr(e) for e in errors],
                  "finished": rec.finished_simulations()}))
"""


def network_namespace_available() -> bool:
    try:
        probe = ["unshare", "-rn", "ip", "link", "set", "lo", "up"]
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["keepalive", "control"])
def test_a_peer_whose_host_vanishes_mid_frame_is_dropped_by_keepalive(mode: str) -> None:
    """In a private network namespace (``unshare -rn``): a raw ZMTP peer sends 96 MiB of
    a 512 MiB frame, then its address disappears (its host is gone: no FIN, no RST,
    no answer). TCP keepalive (shortened to 1 s + 2 x 1 s) closes the connection and
    the memory comes back, while a `Client` on another address streams a simulation
    whose every step reaches the buffer. The control, without keepalive, keeps it."""
    if not network_namespace_available():
        pytest.skip("needs unprivileged network namespaces and iproute2 (unshare -rn, ip)")
    tests = f"{Path(__file__).parents[1]}:{Path(__file__).parent}"
    wait = "20" if mode == "keepalive" else "6"  # closed after ~3 s with keepalive
    cmd = ["unshare", "-rn", sys.executable, "-c", VANISHED_HOST, mode, tests, str(SENT), wait]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["held"] > FREED and not result["errors"] and result["finished"] == [1]
    if mode == "keepalive":
        assert result["left"] < result["held"] - FREED, result  # freed
    else:
        assert result["left"] > result["held"] - FREED // 2, result  # still held


@pytest.mark.timeout(60)
def test_a_peer_that_never_completes_the_handshake_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(liveness, "HANDSHAKE_TIMEOUT", 0.5)  # 30 s in production
    with running() as rec:
        assert rec.endpoint is not None
        host, port = rec.endpoint.removeprefix("tcp://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as silent:
            assert closed_by_peer(silent, 20), "a peer without handshake was kept"
        with socket.create_connection((host, int(port)), timeout=10) as half:
            half.sendall(b"\xff" + bytes(8) + b"\x7f")  # the greeting's first 10 bytes
            assert closed_by_peer(half, 20), "a peer with half a greeting was kept"
        rec.check()
