"""A plain TCP listener on loopback that accepts each connection and closes it at once
(a peer that dies mid-handshake, for ever), counting the attempts: the oracle of the
unread-monitor tests (tests/client/test_monitor_unread.py, tests/c/test_c_monitor_unread.py),
whose clients reconnect to it thousands of times."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class RefusingListener:
    """`port` to connect to; `accepted`, the connections accepted (and closed) so far."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)  # (how soon the thread sees `_stop`)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refuse, name="refuse", daemon=True)
        self._thread.start()

    def _refuse(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.close()
            self.accepted += 1

    def wait_for(self, attempts: int, timeout: float) -> int:
        """The count once it reached `attempts`, or when `timeout` seconds passed."""
        deadline = time.monotonic() + timeout
        while self.accepted < attempts and time.monotonic() < deadline:
            time.sleep(0.05)  # (polling a count: the listener signals nothing else)
        return self.accepted

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._listener.close()


@contextmanager
def refusing_listener() -> Iterator[RefusingListener]:
    """A `RefusingListener`, closed (its thread joined) on exit."""
    listener = RefusingListener()
    try:
        yield listener
    finally:
        listener.close()
