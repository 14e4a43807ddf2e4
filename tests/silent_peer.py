"""A program that accepts TCP connections and never writes nor reads (as
``python -m http.server`` is to a ZeroMQ peer: it waits for a line the ZeroMQ greeting
never ends), for the tests of what a client says of a peer that is not a receiver
(tests/client/test_handshake_silent_keyed.py, tests/c/test_c_handshake_silent_keyed.py, and
the short-interval, predict and repeat tests beside them); or, given a `greeting`, one
that writes it first and nothing after (`plain_zmtp_peer`: a serving socket without
CURVE, as a CURVE client sees it). `silent` is the silent program as a fixture (import it
by name into a test module)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def silent_peer(greeting: bytes = b"") -> Iterator[tuple[str, list[socket.socket]]]:
    """The silent program on 127.0.0.1: its endpoint (``tcp://``), and the connections
    it accepted so far (appended by its thread), each sent `greeting` (if any) when
    accepted. Its listener and connections are closed on exit."""
    accepted: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    conn = listener.accept()[0]
                except TimeoutError:
                    continue
                accepted.append(conn)
                if greeting:
                    conn.sendall(greeting)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield f"tcp://127.0.0.1:{listener.getsockname()[1]}", accepted
        finally:
            done.set()
            thread.join(timeout=10)
            for conn in accepted:
                conn.close()


@pytest.fixture
def silent() -> Iterator[tuple[str, list[socket.socket]]]:
    """`silent_peer` for a test: its endpoint, and the connections it accepted so far."""
    with silent_peer() as peer:
        yield peer


#: the greeting of a ZMTP 3.1 peer with the NULL mechanism (no CURVE): signature,
#: version, mechanism, as-server, filler (64 bytes; ZeroMQ RFC 23)
NULL_GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\0") + bytes(32)


@contextlib.contextmanager
def plain_zmtp_peer() -> Iterator[str]:
    """A serving socket without CURVE, as a CURVE client sees it: on 127.0.0.1, it
    answers each TCP connection with a ZMTP greeting of the NULL mechanism
    (`NULL_GREETING`) and never closes it. Its endpoint (``tcp://``).

    A real socket without CURVE (a `PredictServer`) closes the connection as soon as it
    read the client's CURVE greeting: the client sees the mismatch (ZeroMQ's
    ``HANDSHAKE_FAILED_PROTOCOL``, ``ZMTP_MECHANISM_MISMATCH``) only when it read that
    socket's greeting before the close, which a loaded host may reorder (then a failure
    without detail). Here nothing closes before the client: it reads the whole greeting,
    and its handshake fails with the mismatch's detail every time."""
    with silent_peer(NULL_GREETING) as (endpoint, _):  # (what the client sends: unread)
        yield endpoint


@contextlib.contextmanager
def silent_on_port(port: int, wait: float = 30) -> Iterator[list[socket.socket]]:
    """`silent_peer`'s kind on 127.0.0.1:`port`, which a socket held until now (a
    closed ROUTER's: libzmq lets its listener go after `close` returns, so the bind is
    tried again until it succeeds, up to `wait` s): a serving trainer whose process was
    stopped once its clients were connected, as its kernel is to a new connection. The
    connections it accepted so far (appended by its thread); all closed on exit."""
    accepted: list[socket.socket] = []
    done = threading.Event()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + wait
        while True:
            try:
                listener.bind(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # (the ROUTER's I/O thread closes it: no event to wait on)
        listener.listen(8)
        listener.settimeout(0.1)

        def accept() -> None:
            while not done.is_set():
                try:
                    accepted.append(listener.accept()[0])
                except TimeoutError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield accepted
        finally:
            done.set()
            thread.join(timeout=10)
            for conn in accepted:
                conn.close()
