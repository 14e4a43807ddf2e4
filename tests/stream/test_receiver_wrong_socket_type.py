"""A peer of the wrong ZeroMQ socket type at the receiver's data endpoint (a REQ or
DEALER: a prediction request given the stream endpoint of ``rank_N.json``): libzmq
refuses it in its handshake and closes it, and the receiver said nothing (the peer
either waits forever or, the C and Python predict clients, fails with its own message).
libzmq 4.3.5 gives the receiver an ``ACCEPTED`` then a ``DISCONNECTED``, with no event
between or a ``HANDSHAKE_FAILED_NO_DETAIL`` (whichever side saw the mismatch first: each
in about half the tries), as for a peer that is not ZeroMQ (`stream.connections`): the
receiver now warns of the first such close, naming the likely cause and the fix, and
sums the others up in one line at its end (`stream.handshakes`: connection attempts, by
cause). A PUSH that closes is not counted.

Real sockets: a real `Receiver` (its PULL socket), pyzmq REQ, DEALER and PUSH peers in a
context of their own (their own I/O thread, as a process of their own). Waits on the
receiver's log lines (its ingester reads the events at its next empty poll), never on
time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
import zmq
from helpers import running

LOGGER = "melissa_trainer.stream.receiver"
CLOSED = "was closed in its ZeroMQ handshake"  # (the first of a cause in full, then short)
WRONG = CLOSED + ": likely a socket that cannot send to a PULL"


class Lines(logging.Handler):
    """The receiver logger's records (DEBUG and up); `wait(n)` until n wrong-type lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.records.append(record)
            self._changed.notify_all()

    def wrong(self) -> list[logging.LogRecord]:
        with self._changed:
            return [r for r in self.records if CLOSED in r.getMessage()]

    def wait(self, n: int, timeout: float = 30.0) -> None:
        with self._changed:
            self._changed.wait_for(lambda: len(self.wrong()) >= n, timeout)
        assert len(self.wrong()) >= n, [r.getMessage() for r in self.records]


@pytest.fixture
def lines() -> Iterator[Lines]:
    log = logging.getLogger(LOGGER)
    handler, level = Lines(), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.mark.timeout(60)
def test_req_and_dealer_peers_are_warned_of_once_then_summed_up(lines: Lines) -> None:
    ctx = zmq.Context()
    peers: list[zmq.Socket] = []
    try:
        with running() as rec:
            assert rec.endpoint is not None
            push = ctx.socket(zmq.PUSH)  # (not counted: its handshake succeeded)
            monitor = push.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
            push.connect(rec.endpoint)
            assert monitor.poll(30_000), "the PUSH's handshake did not succeed"
            monitor.close(linger=0)
            push.close(linger=0)
            for kind in (zmq.REQ, zmq.DEALER, zmq.REQ):
                peer = ctx.socket(kind)
                peer.linger = 0
                peers.append(peer)
                peer.connect(rec.endpoint)
                if kind == zmq.DEALER:  # (a REQ's send waits for a handshake: none comes)
                    peer.send(b"predict me", zmq.NOBLOCK)
                lines.wait(len(peers))  # (one at a time: each its own handshake)
    finally:
        for peer in peers:
            peer.close(linger=0)
        ctx.term()
    wrong = lines.wrong()  # (a peer may dial again once or more: libzmq's reconnect)
    assert len(wrong) >= 3 and wrong[0].levelno == logging.WARNING
    assert {r.levelno for r in wrong[1:]} == {logging.DEBUG}, [r.getMessage() for r in wrong]
    first = wrong[0].getMessage()
    assert WRONG in first and rec.endpoint in first and "REQ or DEALER" in first, first
    assert "serve_N.json" in first and "rank_N.json" in first, first  # the fix, the cause
    # (at WARNING, as the warning that promised it: default logging hid an INFO)
    summary = [r.getMessage() for r in lines.records if r.levelno == logging.WARNING]
    want = f"{len(wrong)} connection attempts refused in their ZeroMQ handshake in all "
    assert any(m.startswith(want + f"({len(wrong)} without detail;") for m in summary), summary


@pytest.mark.timeout(60)
def test_under_several_ranks_the_warning_names_the_receivers_rank(lines: Lines) -> None:
    """Each rank's receiver may say the same paragraph (a trial read one twice, with no
    rank): under several ranks it ends naming the rank whose receiver says it."""
    ctx = zmq.Context()
    peer = ctx.socket(zmq.REQ)
    peer.linger = 0
    try:
        with running(rank=1, world_size=2) as rec:
            assert rec.endpoint is not None
            peer.connect(rec.endpoint)
            lines.wait(1)
    finally:
        peer.close(linger=0)
        ctx.term()
    first = lines.wrong()[0].getMessage()
    assert first.endswith("(1 such; the next summed up at the end) (receiver of rank 1)"), first
