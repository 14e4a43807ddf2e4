"""A program at an endpoint that is not a receiver: it answers each connection as an HTTP
server answers a request line it cannot parse, and hangs up, so that every ZeroMQ
handshake with it ends without a detail (tests/client/test_not_a_receiver.py,
tests/c/test_c_not_a_receiver_drops_words.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["http_peer"]


@contextmanager
def http_peer(answer: bytes) -> Iterator[str]:
    """``tcp://127.0.0.1:PORT`` where a thread reads each connection's first bytes (up to
    100), sends `answer` and closes it; on exit the listener is closed and the thread
    joined (10 s at most)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # (closed: the test is over)
                return
            with conn:
                conn.recv(100)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)
