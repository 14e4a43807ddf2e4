"""A receiver whose trainer was killed in the instant between its kernel accepting the
client's TCP connection and its ZeroMQ handshake (a user's trial, 2026-12-04: SIGKILL as
the trainer's serve file appeared) left the solver warning, 2 s later, that the endpoint
was "not a melissa-trainer receiver ...: check the endpoint" though the endpoint was
right and its trainer was gone (the port refused the reconnections; the solver then
followed the resumed trainer). `Handshakes.not_receivers` counted a peer that accepted
TCP and never spoke ZeroMQ, whether or not that connection was still up.

A peer is said not to be a receiver only while its silent connection is up (a program
that never speaks ZeroMQ, or a stopped trainer, holds it): one whose connection closed
and whose port now refuses is gone, which the waits say in their own words. A raw TCP
listener accepts the client's connection, then closes, listener first (its port refuses
the reconnections), as a killed process's kernel does. Failed before: `not_receivers`
named the endpoint and `warn` logged `NOT_RECEIVER`."""

from __future__ import annotations

import logging
import socket

import pytest
import zmq
from waiting import wait_until

from melissa_trainer.client import handshake
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_words import NOT_RECEIVER


@pytest.mark.timeout(60)
def test_a_peer_gone_after_accepting_tcp_is_not_said_not_a_receiver(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 0
    shakes = Handshakes("simulation 0 rank 0")
    conn = None
    try:
        shakes.watch(sock, keyed=False)
        sock.connect(endpoint)
        conn, _ = listener.accept()  # TCP accepted; no ZeroMQ greeting ever comes back
        wait_until(lambda: (shakes.read(), shakes._tcp_at[0])[1] is not None, "TCP up", 30)
        listener.close()  # the process killed: its port refuses the reconnections
        conn.close()
        wait_until(lambda: (shakes.read(), shakes.down_since[0])[1] is not None, "down", 30)
        monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.0)  # (long past, by its clock)
        assert shakes.not_receivers([endpoint]) == []
        with caplog.at_level(logging.WARNING):
            shakes.warn([endpoint])
        assert not [r for r in caplog.records if NOT_RECEIVER in r.getMessage()]
    finally:
        listener.close()
        if conn is not None:
            conn.close()
        shakes.close()
        sock.close(linger=0)
        ctx.term()


@pytest.mark.timeout(60)
def test_a_silent_peer_whose_connection_is_up_is_still_said_not_a_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 0
    shakes = Handshakes()
    conn = None
    try:
        shakes.watch(sock, keyed=False)
        sock.connect(endpoint)
        conn, _ = listener.accept()
        wait_until(lambda: (shakes.read(), shakes._tcp_at[0])[1] is not None, "TCP up", 30)
        monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.0)
        assert shakes.not_receivers([endpoint]) == [endpoint]
    finally:
        listener.close()
        if conn is not None:
            conn.close()
        shakes.close()
        sock.close(linger=0)
        ctx.term()
