"""A close after a failure (``close(bye=False)``) to a peer that accepts each TCP
connection and closes it at once (a wrong service on the port, a receiver refusing the
connection) said "the receiver is unreachable, disconnected for 0 s without a new
connection (...; the trainer died, or its node)": nothing died, every connection was
taken and ended before a ZeroMQ handshake. It now says what a close with BYE says of
the same peer (`NOT_RECEIVER_DROPS`: it ended every handshake without completing one).

Failed before: the warning held "the trainer died, or its node" and not
`NOT_RECEIVER_DROPS`. The peer is a real listener in a thread; the close runs once it
accepted three connections (two ended before the third was tried: their failures are
in the monitor's queue)."""

from __future__ import annotations

import logging
import socket
import threading

import numpy as np
import pytest
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.handshake_notes import CUT_BEFORE_HANDSHAKE
from melissa_trainer.client.handshake_words import NOT_RECEIVER_DROPS

#: far beyond the test's timeout: a close that waited for it fails by the marker
FAILED_CLOSE_TIMEOUT = 3600.0


@pytest.mark.timeout(60)
def test_a_close_without_bye_to_a_peer_closing_each_connection_says_not_a_receiver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    three, stop = threading.Event(), threading.Event()

    def close_each() -> None:
        accepted = 0
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # (the listener closed: the test is over)
                return
            conn.close()
            accepted += 1
            if accepted >= 3:
                three.set()

    peer = threading.Thread(target=close_each, daemon=True)
    peer.start()
    tuning = ClientTuning(failed_close_timeout=FAILED_CLOSE_TIMEOUT)
    client = Client({"u": ((4,), "float32")}, simulation_id=5, endpoints=endpoint, tuning=tuning)
    try:
        client.send(0, u=np.ones(4, np.float32))
        assert three.wait(30), "the peer accepted fewer than three connections"
    finally:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
            client.close(bye=False)
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # (wakes the blocked accept, which raises)
        peer.join(10)
        listener.close()
    said = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0] == f"simulation 5 rank 0: queued messages not delivered to {endpoint}: " + (
        NOT_RECEIVER_DROPS
    ), said
    assert "died" not in said[0], said


@pytest.mark.timeout(60)
def test_a_close_without_bye_to_a_peer_that_ended_its_one_connection_does_not_say_died(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A peer that ended the one connection it accepted before any handshake, its port
    refusing since (a trainer killed as it started, or another program that went): which
    one is not known, and the close says both (`CUT_BEFORE_HANDSHAKE`). Failed before:
    "the trainer died, or its node", as of a receiver that had completed a handshake."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    tuning = ClientTuning(failed_close_timeout=FAILED_CLOSE_TIMEOUT)
    client = Client({"u": ((4,), "float32")}, simulation_id=6, endpoints=endpoint, tuning=tuning)
    try:
        client.send(0, u=np.ones(4, np.float32))
        conn, _ = listener.accept()
        listener.close()  # (the port refuses the reconnections)
        conn.close()
        shakes = client._transport.handshakes
        wait_until(lambda: (shakes.read(), shakes.down_since[0])[1] is not None, "down", 30)
    finally:
        listener.close()
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
            client.close(bye=False)
    said = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].endswith(f"a disconnected receiver; {CUT_BEFORE_HANDSHAKE})"), said
    assert "died, or its node" not in said[0], said
