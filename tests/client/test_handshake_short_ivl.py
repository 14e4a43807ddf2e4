"""A handshake interval (``ZMQ_HANDSHAKE_IVL``) set below the 2 s bound of the rule that
tells libzmq's handshake timeouts from refusals (`client.handshake.NOT_ZMQ_AFTER`): a
user's ``ClientTuning.socket_options``, or a test's. The bound was 2 s whatever the
interval, so that each timeout of a silent peer (every `IVL_MS`) ended a connection
younger than it and was read as a refusal: a keyed client's close to a peer that
accepts TCP and never answers raised "the server key does not match" (a key-less one's,
"not a receiver, or CURVE only ... nothing sent to it was delivered") after two
intervals, as in the 30 s case the rule was made for. The bound is now the smaller of
2 s and half the socket's interval (`handshake_timing.timeout_bound`); the C client's is the
same (tests/c/test_c_handshake_short_ivl.py). Each test here failed before.

Real sockets on 127.0.0.1: a silent TCP peer (accepts, never writes)."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest
import zmq
from keys_receiver_process import closing
from silent_peer import silent  # noqa: F401 (a fixture)
from silent_predict import request_to_silent_peer
from waiting import wait_until

from melissa_trainer.client import ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.client.handshake_timing import NOT_ZMQ_AFTER, timeout_bound
from melissa_trainer.client.handshake_words import MISMATCH, NOT_RECEIVER, NOT_RECEIVER_DROPS

pytestmark = pytest.mark.e2e  # seconds of handshake intervals

#: below NOT_ZMQ_AFTER: the bound is half of it
IVL_MS = 600
FIELDS = {"u": ((4,), "float32")}


def test_the_bound_follows_the_sockets_handshake_interval() -> None:
    ctx = zmq.Context()
    try:
        with ctx.socket(zmq.PUSH) as sock:
            assert timeout_bound(sock) == NOT_ZMQ_AFTER  # (the default: 30 s)
            sock.setsockopt(zmq.HANDSHAKE_IVL, IVL_MS)
            assert timeout_bound(sock) == IVL_MS / 2000
            sock.setsockopt(zmq.HANDSHAKE_IVL, 0)  # (no timeout at all)
            assert timeout_bound(sock) == NOT_ZMQ_AFTER
            sock.setsockopt(zmq.HANDSHAKE_IVL, 10_000)
            assert timeout_bound(sock) == NOT_ZMQ_AFTER
    finally:
        ctx.term()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_a_close_to_a_silent_peer_with_a_short_interval_says_not_a_receiver(
    silent: tuple[str, list[socket.socket]],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    keyed: bool,
) -> None:
    endpoint, accepted = silent
    monkeypatch.delenv(ENV_RENDEZVOUS, raising=False)
    monkeypatch.delenv(ENV_KEY, raising=False)
    if keyed:
        monkeypatch.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())
    options: dict[str, Any] = {"socket_options": {zmq.HANDSHAKE_IVL: IVL_MS}}
    tuning = ClientTuning(close_timeout=4.0, **options)
    client = Client(FIELDS, simulation_id=7, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    thread, failed = closing(client)
    wait_until(lambda: len(accepted) >= 4 or not thread.is_alive(), "4 connections", timeout=30)
    assert thread.is_alive() and not failed, failed  # (before: raised at the second's end)
    thread.join(timeout=30)
    assert not thread.is_alive() and len(failed) == 1, failed
    said = str(failed[0])
    assert f"{endpoint}: {NOT_RECEIVER}" in said, said
    assert MISMATCH not in said and NOT_RECEIVER_DROPS not in said, said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_a_request_to_a_silent_peer_with_a_short_interval_is_a_timeout(
    silent: tuple[str, list[socket.socket]],  # noqa: F811
    keyed: bool,
) -> None:
    request_to_silent_peer(silent, keyed, IVL_MS)
