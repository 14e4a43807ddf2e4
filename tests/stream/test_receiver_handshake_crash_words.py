"""A client that ends in its handshake is named among the causes of a refusal "without
detail" (`stream.handshakes`).

A user trial (htrial47): an MPI solver given the right key by the rendezvous, on a
receiver with CURVE, crashed (SIGSEGV, MPI_Abort) a few milliseconds after it started;
its ranks' connections ended in their CURVE handshake. The receiver warned "most likely
a client with no CURVE key or another key", else a wrong socket type, else a port probe:
the user was sent to check a key that was right, and the crash it had was not named.

A raw TCP connection that closes before its first byte is such an end, seen from the
receiver: accepted, no handshake, disconnected (no ZeroMQ detail). Waits on the
receiver's log line, never on time.
"""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

import pytest
import zmq
from helpers import running
from waiting import wait_until

LOGGER = "melissa_trainer.stream.receiver"
CLOSED = "was closed in its ZeroMQ handshake"
ENDED = "a client process that ended in its handshake (a solver that crashed or was killed"

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq without CURVE")


def closed_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and CLOSED in r.getMessage()
    ]


@pytest.mark.parametrize("curve", [True, False])
@pytest.mark.timeout(60)
def test_a_connection_ended_in_its_handshake_names_a_crashed_client(
    caplog: pytest.LogCaptureFixture, curve: bool
) -> None:
    """The refusal without detail names a client that ended (crashed, killed) in its
    handshake, on a receiver with CURVE and on a plain one, beside the causes it named."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    secret = zmq.curve_keypair()[1] if curve else None
    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None
        where = urlsplit(rec.endpoint)
        with socket.create_connection((where.hostname, where.port), timeout=10):
            pass  # closed before its first byte: a process that died in its handshake
        wait_until(lambda: closed_warnings(caplog), lambda: closed_warnings(caplog), 30)
    (said,) = closed_warnings(caplog)
    assert ENDED in said, said
    assert "port probe" in said, said  # (the other causes still said)


@pytest.mark.timeout(60)
def test_a_solver_killed_in_its_handshake_as_the_study_stops_is_not_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the study stops (`Receiver.study_stops`, before its launcher kills the
    solvers), a connection ended in its handshake without detail is a solver the study
    killed as it started: said at DEBUG and summed up in one INFO line at the end, not
    warned of as a refusal (before: the refusal's warning, naming keys and port probes;
    a soak's 2-rank run warned so once, a cause this may have been, not established)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    at_stop = "closed in its handshake as the study stopped"
    with running() as rec:
        assert rec.endpoint is not None
        rec.study_stops()
        where = urlsplit(rec.endpoint)
        with socket.create_connection((where.hostname, where.port), timeout=10):
            pass  # (a solver killed in its handshake)
        wait_until(lambda: at_stop in caplog.text, at_stop, 30)
    assert closed_warnings(caplog) == []
    said = [
        r.getMessage() for r in caplog.records if "as the study stopped: solvers" in r.getMessage()
    ]
    assert said == [
        "1 connection(s) closed in their ZeroMQ handshake as the study stopped: "
        "solvers killed as they started, not refused"
    ], said
