"""A receiver whose connection is in progress (ZeroMQ's CONNECT_DELAYED read, its
CONNECTED not yet) is not disconnected: a close after a failure, which does not wait
for a disconnected receiver (``disconnected_timeout`` 0), waits for it up to
``failed_close_timeout``, and names that bound.

The flake this pins (tests/client/test_close_bounds.py, once in CI, under load): the
failed close read CONNECT_DELAYED, counted it down (for 0 s: gone at once), then its
message's notes read the monitor again, found CONNECTED, and the close gave up saying
"the receiver is unreachable, disconnected for 0 s without a new connection" about a
receiver that had just connected. The events here are fed in that order
(`fed_monitor`), or the connect is held in progress for real (a listener whose accept
queue is full drops the client's SYN)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import zmq
from backlogged import backlogged  # noqa: F401 (a fixture)
from fed_monitor import ENDPOINT, fed_and_feed, feed_event

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.peer_watch import PeerWatch


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def _connected_while_read(handshakes: Handshakes, feed: zmq.Socket) -> None:
    """CONNECTED comes as the notes of `PeerWatch.gone` read the monitor (after its own
    read found the receiver down): the order the loaded CI node gave."""
    read = handshakes.never_connected

    def never_connected(endpoints: list[str]) -> list[str]:
        feed_event(feed, zmq.EVENT_CONNECTED)
        handshakes.never_connected = read  # type: ignore[method-assign]  # (once)
        return read(endpoints)

    handshakes.never_connected = never_connected  # type: ignore[method-assign]


@pytest.mark.timeout(30)
def test_a_connect_in_progress_is_not_a_receiver_gone(context: zmq.Context) -> None:
    """Before: "to tcp://127.0.0.1:9: the receiver is unreachable, disconnected for 0 s
    without a new connection (...)", the CI flake's words."""
    handshakes, feed = fed_and_feed(context, False, [(zmq.EVENT_CONNECT_DELAYED, 0)])
    _connected_while_read(handshakes, feed)
    watch = PeerWatch(handshakes, [ENDPOINT], started=0.0)
    assert watch.gone(0.0) is None
    assert not watch.down()
    handshakes.close()


@pytest.mark.timeout(30)
def test_a_receiver_that_connects_as_the_notes_read_is_not_said_gone(
    context: zmq.Context,
) -> None:
    """A failed attempt (CONNECT_RETRIED: down) read, then CONNECTED as the message's
    notes read: the receiver is connected; saying it "disconnected for 0 s without a new
    connection" contradicts what was just read (before: said so)."""
    handshakes, feed = fed_and_feed(context, False, [(zmq.EVENT_CONNECT_RETRIED, 100)])
    _connected_while_read(handshakes, feed)
    watch = PeerWatch(handshakes, [ENDPOINT], started=0.0)
    assert watch.gone(0.0) is None
    handshakes.close()


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_waits_for_a_connect_in_progress(
    backlogged: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: the close gave up at once, "the receiver is unreachable, tried for 0 s
    (a close after a failure does not wait for a disconnected receiver)"."""
    tuning = ClientTuning(close_timeout=60, failed_close_timeout=0.3)
    client = Client({"u": ((4,), "float32")}, simulation_id=5, endpoints=backlogged, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        client.close(bye=False)
    said = caplog.text
    assert "not delivered within failed_close_timeout=0.3 s" in said, said
    assert "unreachable" not in said, said
    print(said)
