"""`backlogged`: the endpoint of a host that never answers a connect, for the tests of the
clients' connect bounds (tests/client/test_connect_in_progress.py, test_connect_timeout.py,
tests/c/test_c_close_connect_timeout.py): a listener whose accept queue is full, so that
the kernel drops the client's SYNs (retried after 1 s, 3 s...) and its connect stays in
progress until the kernel, or the client's ZMQ_CONNECT_TIMEOUT, gives up. Deterministic
on loopback, unlike a non-routable address (a network may answer or refuse it)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

__all__ = ["backlogged"]


@pytest.fixture
def backlogged() -> Iterator[str]:
    """The ``tcp://127.0.0.1:PORT`` of a listener whose accept queue is full."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        # (one fills a backlog of 0; a second, whose SYN is dropped once it is full,
        # fills it if the first's ACK was not queued yet)
        fillers = [socket.create_connection(("127.0.0.1", port), timeout=5), socket.socket()]
        fillers[1].setblocking(False)
        assert fillers[1].connect_ex(("127.0.0.1", port)) != 0  # (EINPROGRESS)
        try:
            yield f"tcp://127.0.0.1:{port}"
        finally:
            for filler in fillers:
                filler.close()
