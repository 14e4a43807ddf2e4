"""What the receiver says of the clients it refuses in their ZeroMQ handshake
(`stream.handshakes`), CURVE first where the receiver has it.

A user trial: a receiver with ``curve_secret_key``, 4 clients sending to it, some with no
key, some with a wrong one. Its log said only "likely a socket that cannot send to a PULL
(a REQ or DEALER ...) else not ZeroMQ (a port probe)", never CURVE nor a key, and at its
end "2 connections closed ... (a wrong socket type)": the attempts that libzmq refused
with a detail (``HANDSHAKE_FAILED_PROTOCOL``: a mechanism mismatch, a CURVE
cryptographic error) were read and dropped, only those without one (the client closed
first) were counted and worded as a wrong socket type.

Real sockets: a real `Receiver` (its PULL socket, with and without CURVE) and pyzmq
PUSH clients in a context of their own (their own I/O thread, as a process of their
own). Waits on the receiver's log lines (its ingester reads the events at its next empty
poll; `wait_until`), never on time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import zmq
from helpers import running
from waiting import wait_until

LOGGER = "melissa_trainer.stream.receiver"
CLOSED = "was closed in its ZeroMQ handshake"
NO_KEY = "a client without a CURVE key (it connects in plain text; this receiver takes CURVE"
OTHER_KEY = "a client with another CURVE key than this receiver's"
A_KEY = "a client with a CURVE key (this receiver takes plain connections)"
FIX = "give the client this receiver's curve_public_key"

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq without CURVE")


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    try:
        yield ctx
    finally:
        ctx.destroy(linger=0)  # (closes the clients' sockets)


def push(
    ctx: zmq.Context, endpoint: str, server_key: bytes | None, once: bool = False
) -> zmq.Socket:
    """A PUSH client of `ctx` dialing `endpoint`, CURVE with `server_key` as the
    receiver's public key (None: no key); `once`: it does not dial again once refused.
    Kept by the caller (a socket collected is closed)."""
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 0
    if once:
        sock.reconnect_ivl = -1
    if server_key is not None:
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.curve_serverkey = server_key
    sock.connect(endpoint)
    return sock


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def wait_for_warning(caplog: pytest.LogCaptureFixture, words: str) -> str:
    """The first WARNING with `words`, once logged (a client dials again until refused
    with the detail that says it: libzmq's detail races with the client's own close)."""
    wait_until(lambda: any(words in m for m in warnings(caplog)), lambda: warnings(caplog), 30)
    return next(m for m in warnings(caplog) if words in m)


@pytest.mark.timeout(60)
def test_a_client_without_a_key_is_named_on_a_curve_receiver(
    caplog: pytest.LogCaptureFixture, context: zmq.Context
) -> None:
    """A client without a key stops dialing once it sees the mismatch itself, which
    races with the receiver's detail: new clients, one attempt each, until the
    receiver has seen one with its detail (about one in two)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    _, secret = zmq.curve_keypair()

    def refused() -> int:
        return sum(CLOSED in r.getMessage() for r in caplog.records)

    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None
        for tries in range(1, 41):
            client = push(context, rec.endpoint, None, once=True)
            wait_until(lambda: refused() >= tries, lambda: warnings(caplog), 30)  # noqa: B023
            client.close()  # (once its attempt is seen: a close before would cancel it)
            if any(NO_KEY in m for m in warnings(caplog)):
                break
        said = wait_for_warning(caplog, NO_KEY)
    assert rec.endpoint in said and FIX in said, said
    assert "MELISSA_TRAINER_KEY" in said and "rank_N.json" in said, said  # where the key is
    assert "REQ or DEALER" not in said, said  # (the trial's words: no key named)
    # the first refusal of any cause puts CURVE first (one without detail included)
    firsts = [m for m in warnings(caplog) if CLOSED in m]
    assert all("CURVE" in m.partition(CLOSED)[2][:120] for m in firsts), firsts


@pytest.mark.timeout(60)
def test_a_client_with_another_key_is_named_on_a_curve_receiver(
    caplog: pytest.LogCaptureFixture, context: zmq.Context
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    _, secret = zmq.curve_keypair()
    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None and rec.curve_public_key is not None
        other, _ = zmq.curve_keypair()
        assert other != rec.curve_public_key.encode()
        client = push(context, rec.endpoint, other)
        said = wait_for_warning(caplog, OTHER_KEY)
        client.close()
    assert rec.endpoint in said and FIX in said and "MELISSA_TRAINER_KEY" in said, said
    assert "REQ or DEALER" not in said, said


@pytest.mark.timeout(60)
def test_a_client_with_a_key_is_named_on_a_plain_receiver(
    caplog: pytest.LogCaptureFixture, context: zmq.Context
) -> None:
    """Whichever side sees the mismatch first (the detail, or none), the words name a
    client with a key, and the fix."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with running() as rec:
        assert rec.endpoint is not None and rec.curve_public_key is None
        client = push(context, rec.endpoint, zmq.curve_keypair()[0])
        said = wait_for_warning(caplog, A_KEY)
        client.close()
    assert rec.endpoint in said and "MELISSA_TRAINER_KEY" in said, said


@pytest.mark.timeout(60)
def test_every_refused_attempt_is_counted_and_the_count_says_what_it_counts(
    caplog: pytest.LogCaptureFixture, context: zmq.Context
) -> None:
    """The trial's 4 clients, 2 without a key and 2 with a wrong one, each dialing once
    (``ZMQ_RECONNECT_IVL`` -1): 4 attempts refused, 4 counted (2 were, before), the 2
    wrong keys as such (the receiver alone can tell: it cannot open their HELLO), the
    count said to be of attempts (a client dials again at each reconnect interval)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    _, secret = zmq.curve_keypair()

    def refused() -> list[str]:
        return [r.getMessage() for r in caplog.records if CLOSED in r.getMessage()]

    with running(curve_secret_key=secret) as rec:
        assert rec.endpoint is not None
        keys = (None, zmq.curve_keypair()[0], None, zmq.curve_keypair()[0])
        clients = [push(context, rec.endpoint, key, once=True) for key in keys]
        wait_until(lambda: len(refused()) >= 4, refused, 30)
        for client in clients:
            client.close()
    assert len(refused()) == 4, refused()
    (summary,) = [m for m in warnings(caplog) if "in their ZeroMQ handshake in all" in m]
    assert summary.startswith("4 connection attempts refused in their ZeroMQ handshake in all ("), (
        summary
    )
    assert "2 from a client with another CURVE key" in summary, summary
    assert "attempts, not clients" in summary, summary
    assert "wrong socket type" not in summary, summary
