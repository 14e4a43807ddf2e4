"""The client's PUSH sockets: connected as its tuning says, sends bounded by deadlines.

A deadline is a `time.monotonic()` instant, or None for no bound. ZeroMQ's SNDTIMEO
bounds one call; `arm` sets it to what is left of a deadline that bounds several (a
client's `send_timeout` bounds a whole `send`). A deadline of None leaves SNDTIMEO as
it is (-1 from `connect`): no system call on unbounded sends. Not thread-safe: the
sockets are used under the client's lock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import zmq

from melissa_trainer.client.config import ClientTuning
from melissa_trainer.client.handshake import Handshakes

__all__ = ["arm", "connect", "deadline_after", "ms_left"]


def deadline_after(timeout: float | None) -> float | None:
    """The deadline `timeout` seconds from now (None: no bound)."""
    return None if timeout is None else time.monotonic() + timeout


def ms_left(deadline: float) -> int:
    """Whole milliseconds left until `deadline`, at least 0."""
    return max(0, int((deadline - time.monotonic()) * 1000))


def arm(sock: zmq.Socket, deadline: float | None) -> None:
    """Bound the next blocking send of `sock` by `deadline` (None: leave it as it is)."""
    if deadline is not None:
        sock.setsockopt(zmq.SNDTIMEO, ms_left(deadline))


def connect(
    context: zmq.Context,
    endpoints: Sequence[str],
    tuning: ClientTuning,
    curve_keys: Sequence[str | None] | None = None,
    handshakes: Handshakes | None = None,
) -> list[zmq.Socket]:
    """One PUSH socket per endpoint, in order, with the tuning's high-water mark and
    socket options, unbounded sends and linger (`close` bounds them). On failure the
    sockets opened are closed.

    `curve_keys`: per endpoint, the receiver's CURVE server public key (Z85), or None
    for a receiver without CURVE. The client's own key pair is made here, once per
    call: a receiver authenticates itself to its clients, not the clients to it.
    `handshakes`: watches each socket's handshake from before it connects.

    Raises:
        ValueError: an endpoint ZeroMQ cannot connect to.
    """
    keys = list(curve_keys) if curve_keys is not None else [None] * len(endpoints)
    own = zmq.curve_keypair() if any(k is not None for k in keys) else None
    sockets: list[zmq.Socket] = []
    try:
        for endpoint, key in zip(endpoints, keys, strict=True):
            sock = context.socket(zmq.PUSH)
            sockets.append(sock)
            sock.setsockopt(zmq.SNDHWM, tuning.sndhwm)
            sock.setsockopt(zmq.LINGER, -1)
            sock.setsockopt(zmq.SNDTIMEO, -1)
            if key is not None and own is not None:  # (own is set when any key is)
                sock.curve_serverkey = key.encode("ascii")
                sock.curve_publickey, sock.curve_secretkey = own
            for option, value in tuning.socket_options.items():
                sock.setsockopt(option, value)
            if handshakes is not None:
                handshakes.watch(sock, key is not None)
            try:
                sock.connect(endpoint)
            except zmq.ZMQError as exc:
                raise ValueError(f"cannot connect to endpoint {endpoint!r}: {exc}") from None
    except BaseException:
        for sock in sockets:
            sock.close(linger=0)
        raise
    return sockets
