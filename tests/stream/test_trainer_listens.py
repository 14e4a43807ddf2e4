"""`trainer_listens.refused`: whether a published endpoint refuses the connection (a
trainer killed on another machine: its port has no listener), told without a word on a
live receiver's side (its handshake completes: a peer closed without a HELLO is not
warned of, where a raw TCP probe is, `stream.handshakes`), and a host name that does
not resolve is not taken for a refusal.

Real sockets: a real `Receiver` (with and without CURVE), a port whose socket was
closed; the receiver's log read once it stopped (its monitor read to its end)."""

from __future__ import annotations

import logging
import socket

import pytest
import zmq
from helpers import running
from waiting import wait_until

from melissa_trainer.stream.trainer_listens import refused

LOGGER = "melissa_trainer.stream.receiver"
CLOSED = "was closed in its ZeroMQ handshake"

pytestmark = pytest.mark.timeout(60)


def closed_port() -> str:
    """A TCP endpoint of this machine that nothing listens on (bound, then closed)."""
    context = zmq.Context()
    try:
        sock = context.socket(zmq.PULL)
        sock.bind("tcp://127.0.0.1:*")
        endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    finally:
        context.destroy(linger=0)
    return endpoint


def raw_probe(endpoint: str) -> None:
    """A TCP connection to `endpoint`, closed at once: no ZeroMQ handshake."""
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    socket.create_connection((host, int(port)), timeout=10).close()


def closes(caplog: pytest.LogCaptureFixture) -> int:
    """The receiver's lines of a peer closed in its handshake (the first a WARNING,
    the next at DEBUG)."""
    return sum(CLOSED in r.getMessage() for r in caplog.records)


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("curve", [False, True], ids=["plain", "curve"])
def test_a_live_receiver_is_not_refused_nor_warned_of(
    caplog: pytest.LogCaptureFixture, curve: bool
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    secret = zmq.curve_keypair()[1] if curve else None
    dead = closed_port()
    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None
        told = refused([(rec.endpoint, rec.curve_public_key), (dead, rec.curve_public_key)])
        raw_probe(rec.endpoint)  # (after it in the monitor: once read, the probe's was)
        wait_until(lambda: closes(caplog) >= 1, lambda: warned(caplog), 30)
    assert told == [False, True]
    assert closes(caplog) == 1, [r.getMessage() for r in caplog.records]  # (the raw one's)


def test_a_host_name_that_does_not_resolve_is_not_refused() -> None:
    """No socket opened, nothing refused: the client takes it (and its sends say why);
    nor is an endpoint libzmq cannot dial (no port), beside one refused."""
    assert refused([("tcp://no-such-host.invalid:5555", None)]) == [False]
    assert refused([("tcp://no-port", None), (closed_port(), None)]) == [False, True]


def _no_network() -> list[str] | None:
    """The command prefix that runs a command in a network namespace of its own (only
    its loopback, down: every address unreachable, ENETUNREACH at once, as an ICMP
    "network unreachable" tells a connect), or None where it cannot be made."""
    import shutil
    import subprocess

    tool = shutil.which("unshare")
    if tool is None:
        return None
    made = subprocess.run([tool, "-rn", "true"], capture_output=True, check=False)
    return [tool, "-rn"] if made.returncode == 0 else None


@pytest.mark.e2e  # (processes of its own)
def test_an_unreachable_network_is_refused() -> None:
    """A connect that the kernel answers "unreachable" (no route: ENETUNREACH, as an
    ICMP net or host unreachable) is refused, as `refused_words` say ("refused, or its
    host unreachable"): libzmq closes the socket it opened (a check of the rule: this
    passed before hstop too)."""
    import subprocess
    import sys

    prefix = _no_network()
    if prefix is None:
        pytest.skip("needs unshare -rn (a user and network namespace)")
    code = (
        "from melissa_trainer.stream.trainer_listens import refused;"
        "print(refused([('tcp://192.0.2.1:5555', None), ('tcp://127.0.0.1:5555', None)]))"
    )
    ran = subprocess.run(
        [*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[True, True]", ran.stdout
