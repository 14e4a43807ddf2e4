"""Each data socket's monitor has an inproc address of its own for the life of the
process. The address was built from `id()` of the socket's `Handshakes`: once a client
was gone, a later one could be allocated at the same address (CPython reuses a freed
object's memory) while the first socket's monitor endpoint was still bound in the
shared context (worker mode: one context for every simulation of a worker,
`serve_simulations`), and the new client's constructor failed with "Address already in
use" (tests/client/test_client_backpressure.py's one-context worker test, once, under load). The
receiver's monitor (`ConnectionWatch`) had the same address rule.

The tests build the second watcher in the first one's memory (`__init__` run again on
the same object: the same `id()`, deterministically), its first socket still open."""

from __future__ import annotations

import pytest
import zmq

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.stream.connections import ConnectionWatch


@pytest.mark.timeout(30)
def test_a_handshakes_at_a_freed_ones_address_takes_a_monitor_address_of_its_own() -> None:
    context = zmq.Context()
    first = context.socket(zmq.PUSH)  # left open: its monitor endpoint stays bound
    later = context.socket(zmq.PUSH)
    try:
        watcher = Handshakes()
        watcher.watch(first, keyed=False)
        Handshakes.__init__(watcher)  # a new Handshakes where the old one was
        watcher.watch(later, keyed=False)  # raised ZMQError "Address already in use"
    finally:
        first.close(linger=0)
        later.close(linger=0)
        context.destroy(linger=0)


@pytest.mark.timeout(30)
def test_a_connection_watch_at_a_freed_ones_address_takes_a_monitor_address_of_its_own() -> None:
    context = zmq.Context()
    first, later = context.socket(zmq.PULL), context.socket(zmq.PULL)
    try:
        watch = ConnectionWatch(first, 1 << 20, lambda: None)
        ConnectionWatch.__init__(watch, later, 1 << 20, lambda: None)  # raised, as above
        watch.close()
    finally:
        first.close(linger=0)
        later.close(linger=0)
        context.destroy(linger=0)
