"""A close that gives up names the setting that bounded its wait, and how to change it
(`melissa_trainer.client.patience.CloseWait`): `close_timeout` for a close that says BYE,
`failed_close_timeout` for a close after a failure (the lower of the two ends it), and,
after a failure, that a disconnected receiver is not waited for (not a
``disconnected_timeout`` of 0 s that no user set). Real sockets on 127.0.0.1.

The "paused trainer" (`paused`) completes the ZeroMQ handshake, as a receiver does
before its process is stopped, and then reads nothing; with small socket buffers, a
large array stays queued for as long as the test wants. Each test waits for the
handshake (`handshaken`: an event, not a time) before its close. It was a TCP listener
that never answered the greeting: a close after a failure then gave up on it as "not a
melissa-trainer receiver" once it had been connected `NOT_ZMQ_AFTER` (2 s) without a
handshake (the rule, as designed), which a loaded machine reached before the 0.3 s
bound under test ended the close: a flake."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import zmq
from held_ports import refused_endpoint
from silent_peer import NULL_GREETING

from melissa_trainer.client import Client, ClientTuning

#: 4 MiB: sent without a copy, held until written, which small buffers never let it be
LARGE = 1 << 20
FIELDS = {"u": ((LARGE,), "float32")}
#: the client's socket buffer, as small as the kernel allows (so is the trainer's)
SMALL_BUFFERS = {zmq.SNDBUF: 4096}
#: the send returns with its array still held (the next send, or the close, waits for it)
KEPT = {"array_reuse": "next_send"}


def _ready(socket_type: bytes) -> bytes:
    """A ZMTP 3.1 READY command (a short command frame) naming `socket_type`."""
    name = b"Socket-Type"
    body = b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(socket_type))
    body += socket_type
    return bytes([0x04, len(body)]) + body


@pytest.fixture
def paused() -> Iterator[str]:
    """The endpoint of a trainer whose process is stopped once its clients connected: it
    answers each connection with a ZMTP greeting and READY as a PULL (the NULL mechanism:
    the client's handshake completes) and reads nothing, its receive buffer small."""
    accepted: list[socket.socket] = []
    done = threading.Event()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (inherited)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)

        def serve() -> None:
            while not done.is_set():
                try:
                    conn = listener.accept()[0]
                except TimeoutError:
                    continue
                accepted.append(conn)
                conn.sendall(NULL_GREETING + _ready(b"PULL"))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            done.set()
            thread.join(timeout=10)
            for conn in accepted:
                conn.close()


def handshaken(client: Client) -> None:
    """Wait until the client's handshake with the paused trainer completed (its
    monitor's event; at most 20 s): the peer is then a receiver, paused, never "not a
    receiver" however long the machine takes to get to the close."""
    handshakes = client._transport.handshakes
    assert handshakes.wait(client.endpoints, time.monotonic() + 20) is None
    assert handshakes.accepted(), "the paused trainer's handshake did not complete in 20 s"


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_names_failed_close_timeout_not_close_timeout(
    paused: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The user set close_timeout=3600 (far beyond this test's timeout: a close that
    waited for it fails by the timeout marker); the wait after the solver's exception is
    bounded by failed_close_timeout: the warning must name that one (before:
    "close_timeout=...", a setting whose change does nothing to this wait)."""
    tuning = ClientTuning(
        close_timeout=3600, failed_close_timeout=0.3, socket_options=SMALL_BUFFERS
    )
    with (
        caplog.at_level("WARNING", logger="melissa_trainer.client.client"),
        pytest.raises(RuntimeError, match="solver diverged"),
        Client(FIELDS, simulation_id=1, endpoints=paused, tuning=tuning, **KEPT) as client,
    ):
        handshaken(client)
        client.send(0, u=np.ones(LARGE, np.float32))
        raise RuntimeError("solver diverged")
    said = caplog.text  # (the 0.3 s bound ended it: its words, not close_timeout's)
    assert "not delivered within failed_close_timeout=0.3 s" in said, said
    assert "ClientTuning(failed_close_timeout=...)" in said, said
    assert "close_timeout=3600" not in said, said


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_bounded_by_a_lower_close_timeout_names_it(
    paused: str, caplog: pytest.LogCaptureFixture
) -> None:
    tuning = ClientTuning(close_timeout=0.3, failed_close_timeout=20, socket_options=SMALL_BUFFERS)
    client = Client(FIELDS, simulation_id=2, endpoints=paused, tuning=tuning, **KEPT)
    handshaken(client)
    client.send(0, u=np.ones(LARGE, np.float32))
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        client.close(bye=False)
    assert "not delivered within close_timeout=0.3 s" in caplog.text, caplog.text
    assert "ClientTuning(close_timeout=...)" in caplog.text, caplog.text


@pytest.mark.timeout(30)
def test_a_close_with_bye_names_close_timeout_and_how_to_change_it(paused: str) -> None:
    tuning = ClientTuning(close_timeout=0.3, socket_options=SMALL_BUFFERS)
    client = Client(FIELDS, simulation_id=3, endpoints=paused, tuning=tuning, **KEPT)
    handshaken(client)
    client.send(0, u=np.ones(LARGE, np.float32))
    with pytest.raises(TimeoutError) as raised:
        client.close()
    said = str(raised.value)
    assert "not delivered within close_timeout=0.3 s" in said, said
    assert "ClientTuning(close_timeout=...)" in said and "failed_close_timeout" not in said, said


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_does_not_name_a_disconnected_timeout_nobody_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The trainer is gone (refused connections) and a large array is still queued: a
    close after a failure gives up at once, and says so, instead of naming
    "disconnected_timeout=0.0 s" (the user's is 3600). Every bound is an hour, far beyond
    this test's timeout: a close that waited for any fails by the timeout marker."""
    large = np.ones(1 << 16, np.float32)  # 256 KiB: sent without a copy, held until sent
    tuning = ClientTuning(close_timeout=3600, failed_close_timeout=3600, disconnected_timeout=3600)
    client = Client(
        {"u": (large.shape, "float32")},
        simulation_id=4,
        endpoints=refused_endpoint(),
        send_timeout=0.3,
        tuning=tuning,
    )
    with pytest.raises(TimeoutError, match="time step 0"):
        client.send(0, u=large)  # nobody takes it
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        client.close(bye=False)  # (given up on the gone receiver: its words below)
    said = caplog.text
    assert "the receiver is unreachable" in said, said
    assert "a close after a failure does not wait for a disconnected receiver" in said, said
    assert "disconnected_timeout=0.0" not in said, said
