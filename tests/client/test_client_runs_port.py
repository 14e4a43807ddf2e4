"""`client_runs.free_port`, the port the client tests connect to before they bind it
(or never bind), is theirs until the test ends: another test's socket cannot take it
meanwhile (one bound and closed could be: a flake on a busy machine), yet their zmq
receiver still binds it."""

from __future__ import annotations

import errno
import socket

import pytest
import zmq
from client_runs import free_port


@pytest.mark.timeout(30)
def test_the_free_port_is_held_for_the_test_yet_a_zmq_bind_takes_it(zctx: zmq.Context) -> None:
    port = free_port()
    other = socket.socket()  # another test's socket, binding the port it was given
    try:
        with pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE
    finally:
        other.close()
    refused = socket.socket()
    try:
        with pytest.raises(ConnectionRefusedError):  # nobody listens there yet
            refused.connect(("127.0.0.1", port))
    finally:
        refused.close()
    sock = zctx.socket(zmq.PULL)
    try:
        sock.bind(f"tcp://127.0.0.1:{port}")  # the test's receiver, when it comes
    finally:
        sock.close(linger=0)
