"""How long a data or serving socket's handshake may take before its peer counts as
silent, and when libzmq's handshake timeout may be what ended it: the bounds of
`client.handshake`'s rule (and `client.predict_events`'), which the C client's
clients/c/src/handshake.c keeps alike. Imports zmq only."""

from __future__ import annotations

import zmq

__all__ = ["NOT_ZMQ_AFTER", "REPEAT_AFTER", "timeout_bound"]

#: seconds a TCP connection may go without a completed handshake before its peer counts
#: as `NOT_RECEIVER`: a receiver's libzmq I/O thread answers in milliseconds, even while
#: its trainer's Python is busy
NOT_ZMQ_AFTER = 2.0
#: a silent peer's silence (s) at which `handshake`'s warn says it again, then at each doubling (the
#: wait goes on: a stopped trainer's is as silent; tests/client/test_silent_peer_repeats.py)
REPEAT_AFTER = 15.0


def timeout_bound(sock: zmq.Socket) -> float:
    """Seconds from which a handshake failure without detail may be libzmq's timeout of
    `sock`'s handshake (``ZMQ_HANDSHAKE_IVL``: its peer silent), not a refusal, which
    comes in milliseconds: `NOT_ZMQ_AFTER`, or half the interval when less (0: none).
    The C client's (clients/c/src/handshake.c) is the same."""
    ivl = 0 if sock.closed else int(sock.getsockopt(zmq.HANDSHAKE_IVL))
    return NOT_ZMQ_AFTER if ivl <= 0 else min(NOT_ZMQ_AFTER, ivl / 2000)
