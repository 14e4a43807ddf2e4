"""The client's PUSH sockets: connected as its tuning says, sends bounded by deadlines;
and the DEALER of its requests to a receiver's control endpoint (`control_dealer`).

A deadline is a `time.monotonic()` instant, or None for no bound. ZeroMQ's SNDTIMEO
bounds one call, and never more than `SLICE`: a blocked call then returns (``zmq.Again``)
and its caller looks whether the receivers are still there before it tries again
(`send_wait`, `patience`). `arm` sets it to what is left of a deadline that bounds
several calls (a client's `send_timeout` bounds a whole `send`), at most `SLICE`. A
deadline of None leaves SNDTIMEO as it is (`SLICE`, from `connect`): no system call on
the usual send. Not thread-safe: the sockets are used under the client's lock.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import zmq

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.tuning import ClientTuning

__all__ = [
    "CONNECT_TIMEOUT_FLOOR",
    "MAX_MS",
    "SLICE",
    "arm",
    "arm_slice",
    "connect",
    "connect_timeout_ms",
    "control_dealer",
    "deadline_after",
    "ms_left",
    "to_ms",
]

#: seconds of one blocking call of a client's socket (or wait for a tracker) between
#: two looks at its receivers; ZeroMQ's SNDTIMEO is at most this
SLICE = 0.5
_SLICE_MS = int(SLICE * 1000)
#: ZeroMQ's longest bound in milliseconds (24.8 days): its SNDTIMEO, RCVTIMEO and LINGER
#: are C ints, and pyzmq raises OverflowError past it
MAX_MS = 2**31 - 1


#: the least ZMQ_CONNECT_TIMEOUT (seconds) a data socket gets (`connect_timeout_ms`): a
#: receiver's kernel answers a SYN in microseconds, one whose accept queue overflowed (a
#: fan-in of many clients at once) drops it and is retried after 1 s: a bound below that
#: would abort every such connect before its retry
CONNECT_TIMEOUT_FLOOR = 2.0


def connect_timeout_ms(disconnected_timeout: float | None) -> int:
    """ZeroMQ's ZMQ_CONNECT_TIMEOUT (ms) for a data socket: `disconnected_timeout`, at
    least `CONNECT_TIMEOUT_FLOOR`; 0 (the kernel's bound, ~127 s on Linux) for None.

    A TCP connect to a host that never answers (a wrong or unreachable host: its SYNs
    dropped) stays in progress until the kernel gives up; a connect in progress is not a
    receiver down (`handshake_events.DOWN`: counted down, a close after a failure gave up on a
    receiver connecting at once), so a close, or a blocked send, waited those ~2 minutes
    without a word. With this bound ZeroMQ abandons the attempt (``CLOSED``, then
    ``CONNECT_RETRIED``: down, since the socket was connected, `Handshakes`) and tries
    again: a receiver neither accepting nor refusing for ``disconnected_timeout`` counts
    as one without a connection for that long. The C client's rule (clients/c/src/
    lifecycle.c mt_connect_timeout_ms)."""
    if disconnected_timeout is None:
        return 0
    return to_ms(max(disconnected_timeout, CONNECT_TIMEOUT_FLOOR))


def to_ms(seconds: float) -> int:
    """Whole milliseconds in `seconds` for a ZeroMQ option or wait: 0 if <= 0 (or NaN),
    at most `MAX_MS` (+inf included: a longer bound is capped there)."""
    ms = seconds * 1000
    if not ms > 0:
        return 0
    return MAX_MS if ms >= MAX_MS else int(ms)


def deadline_after(timeout: float | None) -> float | None:
    """The deadline `timeout` seconds from now (None: no bound)."""
    return None if timeout is None else time.monotonic() + timeout


def ms_left(deadline: float) -> int:
    """Whole milliseconds left until `deadline`, at least 0, at most `MAX_MS`."""
    return to_ms(deadline - time.monotonic())


def arm(sock: zmq.Socket, deadline: float | None) -> None:
    """Bound the next blocking send of `sock` by `deadline` and `SLICE` (None: leave it
    as it is, `SLICE` since `connect`)."""
    if deadline is not None:
        sock.setsockopt(zmq.SNDTIMEO, min(ms_left(deadline), _SLICE_MS))


def arm_slice(sock: zmq.Socket, deadline: float | None) -> None:
    """Bound the next blocking send of `sock` by `SLICE` and `deadline` (None: `SLICE`
    alone), whatever it was: a send retried after a slice (`send_wait`)."""
    left = _SLICE_MS if deadline is None else min(ms_left(deadline), _SLICE_MS)
    sock.setsockopt(zmq.SNDTIMEO, left)


def connect(
    context: zmq.Context,
    endpoints: Sequence[str],
    tuning: ClientTuning,
    curve_keys: Sequence[str | None] | None = None,
    handshakes: Handshakes | None = None,
) -> list[zmq.Socket]:
    """One PUSH socket per endpoint, in order, with the tuning's high-water mark and
    socket options, sends blocking `SLICE` at most (their callers wait on in slices)
    and unbounded linger (`close` bounds it). On failure the
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
            sock.setsockopt(zmq.SNDTIMEO, _SLICE_MS)
            sock.setsockopt(zmq.CONNECT_TIMEOUT, connect_timeout_ms(tuning.disconnected_timeout))
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
                # (zmq.strerror: pyzmq's message adds "(addr='...')", the endpoint said
                # again; the C client's words are these, clients/c/src/lifecycle.c)
                why = str(exc) if exc.errno is None else zmq.strerror(exc.errno)
                raise ValueError(f"cannot connect to endpoint {endpoint!r}: {why}") from None
    except BaseException:
        for sock in sockets:
            sock.close(linger=0)
        raise
    return sockets


def control_dealer(
    context: zmq.Context, entry: Mapping[str, Any], disconnected_timeout: float | None
) -> zmq.Socket:
    """A DEALER of `context` for requests to a receiver's control endpoint (ADMISSION,
    HELD, RECEIPT queries), not connected yet (a caller may monitor it first): LINGER 0
    (a request unanswered at close is dropped), CURVE with the public key that the
    receiver's rendezvous `entry` publishes (a key pair of its own), plain when it
    publishes none; its TCP connect bounded as a data socket's (`connect_timeout_ms` of
    the tuning's `disconnected_timeout`: a host that never answers is dialled again, not
    waited on for the kernel's ~2 minutes; C: admission.c mt_follow_dial). Closed again
    if that set-up fails."""
    sock = context.socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.CONNECT_TIMEOUT, connect_timeout_ms(disconnected_timeout))
        key = entry.get("curve_public_key")
        if key:
            sock.curve_serverkey = str(key).encode("ascii")
            sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
    except BaseException:
        sock.close()
        raise
    return sock
