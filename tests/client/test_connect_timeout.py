"""A first connect to a host that never answers (its SYNs dropped: a wrong or unreachable
host) is bounded by the client: ZeroMQ abandons it after the data socket's
ZMQ_CONNECT_TIMEOUT, the tuning's ``disconnected_timeout`` (`sockets.connect_timeout_ms`),
and the receiver then counts down since the socket connected (`handshake.Handshakes`).

Before: a connect in progress is not down (tests/client/test_connect_in_progress.py, a
flake's fix), so a close to such a host waited for the kernel to give up (~127 s on
Linux defaults), silent, and here for its whole ``close_timeout``: "not delivered within
close_timeout=30.0 s". The host is a listener whose accept queue is full (`backlogged`:
the kernel drops the client's SYNs, deterministically)."""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from backlogged import backlogged  # noqa: F401 (a fixture)

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.following import Following
from melissa_trainer.client.sockets import (
    CONNECT_TIMEOUT_FLOOR,
    connect,
    connect_timeout_ms,
    control_dealer,
)


def test_the_connect_timeout_is_the_disconnected_timeout_with_a_floor() -> None:
    assert connect_timeout_ms(60.0) == 60_000
    assert connect_timeout_ms(0.0) == int(CONNECT_TIMEOUT_FLOOR * 1000)  # (not 0: none)
    assert connect_timeout_ms(None) == 0  # (no bound: the kernel's)
    context = zmq.Context()
    try:
        tunings = [ClientTuning(disconnected_timeout=7.5), ClientTuning(socket_options={79: 900})]
        socks = [connect(context, ["tcp://127.0.0.1:1"], tuning)[0] for tuning in tunings]
        assert [s.getsockopt(zmq.CONNECT_TIMEOUT) for s in socks] == [7500, 900]  # (given: wins)
        for sock in socks:
            sock.close(linger=0)
    finally:
        context.term()


@pytest.mark.timeout(90)
def test_a_close_to_a_host_that_never_answers_gives_up_after_disconnected_timeout(
    backlogged: str,  # noqa: F811
) -> None:
    tuning = ClientTuning(close_timeout=30.0, disconnected_timeout=2.0)
    client = Client({"u": ((4,), "float32")}, simulation_id=5, endpoints=backlogged, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with pytest.raises(TimeoutError) as error:
        client.close()
    said = str(error.value)
    assert f"to {backlogged}: the receiver is unreachable, tried for " in said, said
    assert "(disconnected_timeout=2.0 s): no receiver ever accepted a connection at" in said, said
    assert "close_timeout" not in said, said


def test_a_control_dealers_connect_is_bounded_by_the_same_rule() -> None:
    """The DEALERs of the follow socket's questions (ADMISSION, HELD, RECEIPT) get the
    data sockets' bound, from `connect_timeout_ms` (C: admission.c mt_follow_dial,
    clients/c/tests/unit_follow_dial.c); a client's follower takes its tuning's. Before:
    0, the kernel's ~2 minutes on a host that never answers."""
    context = zmq.Context()
    try:
        for disconnected in (7.5, 0.5, None):
            sock = control_dealer(context, {}, disconnected)
            assert sock.getsockopt(zmq.CONNECT_TIMEOUT) == connect_timeout_ms(disconnected)
            sock.close(linger=0)
    finally:
        context.term()
    following = Following.made_for("/rv", 1024, 1.0, 3, 0, "run-a", ["tcp://h:1"], 7.5)
    assert following is not None and following.follower.disconnected_timeout == 7.5
