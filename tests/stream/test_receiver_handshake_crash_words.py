"""A client that ends in its handshake is named among the causes of a refusal "without
detail" (`stream.handshakes`).

A user trial (htrial47): an MPI solver given the right key by the rendezvous, on a
receiver with CURVE, crashed (SIGSEGV, MPI_Abort) a few milliseconds after it started;
its ranks' connections ended in their CURVE handshake. The receiver warned "most likely
a client with no CURVE key or another key", else a wrong socket type, else a port probe:
the user was sent to check a key that was right, and the crash it had was not named.

A process connected by TCP and killed (SIGKILL) before its first byte is such an end,
seen from the receiver: accepted, no handshake, disconnected (no ZeroMQ detail). It
closes once; a client refused dials again every reconnect interval: the first such close
is held, and warned of only once a re-dial follows (`handshakes.BURST_S`, `QUIET_S`);
one never followed is said in one INFO line at the receiver's end. Waits on the
receiver's log lines, never on time (the re-dials go on until the warning is read).
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
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


#: a process that opens a TCP connection to the receiver (its host, its port), says so
#: and waits to be killed: a solver killed (kill -9) before its ZeroMQ handshake ended
KILLED = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
print("connected", flush=True)
time.sleep(600)
"""


def kill_in_handshake(endpoint: str) -> None:
    """A process connected to `endpoint`, killed with SIGKILL once connected."""
    where = urlsplit(endpoint)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(where.hostname), str(where.port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "connected\n"
    finally:
        proc.kill()  # (SIGKILL)
        proc.wait(timeout=30)


def ended_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "and not dialed again" in r.getMessage()]


@pytest.mark.e2e  # (a process)
@pytest.mark.parametrize("curve", [True, False])
@pytest.mark.timeout(60)
def test_a_solver_killed_in_its_handshake_is_one_info_line_not_a_warning(
    caplog: pytest.LogCaptureFixture, curve: bool
) -> None:
    """A solver killed (kill -9) in its handshake while the study runs, on a receiver with
    CURVE and on a plain one: no WARNING (it sent the user to check keys, socket types
    and port probes); one INFO line at the receiver's end names a client that ended
    (crashed, killed) as it started. Failed before: the refusal's WARNING."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    secret = zmq.curve_keypair()[1] if curve else None
    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None
        kill_in_handshake(rec.endpoint)
        wait_until(lambda: CLOSED in caplog.text, CLOSED, 30)  # (the close read: held)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    (said,) = ended_lines(caplog)
    assert said.levelno == logging.INFO
    assert said.getMessage().startswith(
        "1 connection(s) closed in their ZeroMQ handshake once, without detail, and not "
        f"dialed again: most likely {ENDED}"
    ), said.getMessage()


@pytest.mark.timeout(60)
def test_a_peer_that_dials_again_is_warned_of_with_the_crash_among_the_causes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A peer that closes first again and again (a client refused: it re-dials every
    reconnect interval) is still warned of, once, naming a crashed client among the
    causes, and summed up at the end; nothing is said of clients that ended."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    with running(curve_secret_key=zmq.curve_keypair()[1]) as rec:
        assert rec.endpoint is not None
        where = urlsplit(rec.endpoint)

        def dial() -> list[str]:  # (closed before its first byte; again until warned of)
            with socket.create_connection((where.hostname, where.port), timeout=10):
                pass
            return closed_warnings(caplog)

        wait_until(dial, lambda: closed_warnings(caplog), 30, interval=0.1)
    (said,) = closed_warnings(caplog)
    assert ENDED in said and "port probe" in said, said  # (every cause still said)
    assert ended_lines(caplog) == []


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
