"""A `client.handshake.Handshakes` whose one monitor is fed by the test: the order of the
events it reads is the test's, not a race's (tests/client/test_review_handshake_words.py,
test_handshake_silent_keyed.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import zmq

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_events import _EVENT

#: the endpoint the fed events name
ENDPOINT = "tcp://127.0.0.1:9"


def fed(
    context: zmq.Context, keyed: bool, events: Iterable[tuple[int, int]], quiet_for: float = 0.0
) -> Handshakes:
    """A `Handshakes` watching one socket (`keyed`: with a CURVE server key) that never
    connects, whose monitor reported `events` ((event, value) pairs, in order), all
    queued; its monitor last read `quiet_for` s ago (a send after a computation)."""
    return fed_and_feed(context, keyed, events, quiet_for)[0]


def fed_and_feed(
    context: zmq.Context, keyed: bool, events: Iterable[tuple[int, int]], quiet_for: float = 0.0
) -> tuple[Handshakes, zmq.Socket]:
    """`fed`, and the socket that feeds its monitor (`feed_event` queues one more event
    there: one that comes while the client reads, at a point the test chooses)."""
    handshakes = Handshakes()
    handshakes.watch(context.socket(zmq.PUSH), keyed)
    feed, monitor = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    feed.bind("inproc://fed-events")
    monitor.connect("inproc://fed-events")
    handshakes._monitors[0].close(linger=0)
    handshakes._monitors[0] = monitor  # (the stand-in: the watched socket never connects)
    handshakes._drained[0] = time.monotonic() - quiet_for  # (its last read)
    for event, value in events:
        feed.send_multipart([_EVENT.pack(event, value), ENDPOINT.encode()])
    assert monitor.poll(5000)  # (inproc: every event is queued once the first is)
    return handshakes, feed


def feed_event(feed: zmq.Socket, event: int, value: int = 0) -> None:
    """Queue `event` on a `fed_and_feed` monitor (inproc: readable once sent)."""
    feed.send_multipart([_EVENT.pack(event, value), ENDPOINT.encode()])
