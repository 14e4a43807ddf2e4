"""A data socket's monitor (`melissa_trainer.client.handshake.Handshakes`, set up when
it connects) is read only by a wait (a blocked send, a close), never by the usual send:
left unread while a receiver cannot be reached, its events must not stop ZeroMQ.

libzmq's I/O thread blocks on a monitor whose queue is full (about 2,000 events with
the default high-water marks): the socket's reconnections then stop (and every socket
of its context waits), so a trainer that came back was never connected to. The oracle:
a plain TCP listener counts the client's connection attempts, each of which gives the
monitor at least two events (connected, disconnected); before the fix they stopped
after about a thousand (the test's deadline)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import zmq

from melissa_trainer.client.config import ClientTuning
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.sockets import connect

#: connection attempts to count: their events are several times what a full queue holds
ATTEMPTS = 3000


@pytest.mark.timeout(120, method="thread")  # (a hang inside libzmq ignores signals)
def test_reconnections_go_on_while_nothing_reads_the_monitor() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted = 0
    stop = threading.Event()

    def refuse() -> None:  # accept each connection and close it at once (a dying peer)
        nonlocal accepted
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.close()
            accepted += 1

    thread = threading.Thread(target=refuse, name="refuse", daemon=True)
    thread.start()
    context = zmq.Context()
    handshakes = Handshakes()
    tuning = ClientTuning(socket_options={zmq.RECONNECT_IVL: 1})
    sockets = connect(context, [f"tcp://127.0.0.1:{port}"], tuning, None, handshakes)
    try:
        deadline = time.monotonic() + 60  # (thousands of attempts take a few seconds)
        while accepted < ATTEMPTS and time.monotonic() < deadline:
            time.sleep(0.05)  # (polling a count: the listener signals nothing else)
        assert accepted >= ATTEMPTS, f"reconnections stopped after {accepted} attempts"
        handshakes.read()  # (what was queued is still there to read)
        assert handshakes.down_since[0] is not None
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()
        handshakes.close()
        for sock in sockets:
            sock.close(linger=0)
        context.term()
