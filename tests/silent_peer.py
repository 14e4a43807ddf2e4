"""A program that accepts TCP connections and never writes nor reads (as
``python -m http.server`` is to a ZeroMQ peer: it waits for a line the ZeroMQ greeting
never ends), for the tests of what a client says of a peer that is not a receiver
(tests/client/test_handshake_silent_keyed.py, tests/c/test_c_handshake_silent_keyed.py, and
the short-interval, predict and repeat tests beside them); or, given a `greeting`, one
that writes it first and nothing after (tests/c/predict_runs.py `plain_zmtp_peer`)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


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
