"""A request of a `Predictor` to a silent peer (`silent_peer`: accepts TCP, never answers
the ZeroMQ greeting), what the predict tests of a long and a short handshake interval
share (tests/client/test_predict_handshake_silent.py, 2.5 s;
tests/client/test_handshake_short_ivl.py, 0.6 s, below `NOT_ZMQ_AFTER`), and the words
the C client's predict says too (tests/c/test_c_predict_handshake_silent.py)."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest
import zmq

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_errors import SILENT

__all__ = ["request_to_silent_peer", "short_handshakes", "silent_words"]


def silent_words(endpoint: str, timeout: float) -> str:
    """What a request of `timeout` s to a silent `endpoint` says (both clients)."""
    return (
        f"the trainer's serving endpoint {endpoint} accepted a TCP connection but no ZeroMQ "
        f"handshake completed within {timeout} s: {SILENT}"
    )


def short_handshakes(ivl_ms: int) -> zmq.Context:
    """A context whose sockets end a handshake after `ivl_ms` (libzmq's default: 30 s),
    for a `Predictor(context=)`: a test of handshake timeouts that takes seconds."""

    class ShortHandshakes(zmq.Context):  # type: ignore[type-arg]
        def socket(self, socket_type: int, **kwargs: Any) -> zmq.Socket:  # type: ignore[override]
            sock = super().socket(socket_type, **kwargs)
            sock.setsockopt(zmq.HANDSHAKE_IVL, ivl_ms)
            return sock

    return ShortHandshakes()


def request_to_silent_peer(
    silent: tuple[str, list[socket.socket]], keyed: bool, ivl_ms: int
) -> None:
    """A request of four handshake intervals (`ivl_ms`) to the `silent_peer` `silent`
    (its endpoint, its accepted connections), with a server key if `keyed`: a
    `PredictTimeout` that says the peer was silent (`silent_words`), not a refusal, after
    two handshakes at least timed out (three connections)."""
    endpoint, accepted = silent
    timeout = 4 * ivl_ms / 1000
    key = zmq.curve_keypair()[0].decode() if keyed else None
    ctx = short_handshakes(ivl_ms)
    try:
        predictor = Predictor(0, endpoint=endpoint, curve_server_key=key, context=ctx)
        with predictor, pytest.raises(PredictTimeout) as error:  # (before: ValueError)
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=timeout)
    finally:
        ctx.destroy(linger=0)
    said = str(error.value)
    assert len(accepted) >= 3, (len(accepted), said)  # (two handshakes timed out, at least)
    assert said == silent_words(endpoint, timeout), said
