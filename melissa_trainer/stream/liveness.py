"""Which peers a receiver's socket drops, and what their partial messages may hold.

ZeroMQ decodes each connection's messages in its I/O thread: once a frame header
arrives, it allocates the frame whole (up to ``ZMQ_MAXMSGSIZE``, the receiver's
``max_message_bytes`` + `HEADER_ALLOWANCE`) and fills it as the bytes come, so a peer
that stops in the middle of a message holds the part it sent (the pages it filled,
not the size it announced) until its connection closes. The options set here close
connections that cannot make progress:

* **Handshake** (always): a peer that connects and does not complete the ZMTP
  handshake within `HANDSHAKE_TIMEOUT` seconds is dropped.
* **TCP keepalive** (always, TCP only): a connection whose peer host stopped answering
  (node crash, network partition: no FIN or RST ever comes) is closed after
  `KEEPALIVE_IDLE` s of silence plus `KEEPALIVE_COUNT` unanswered probes
  `KEEPALIVE_INTERVAL` s apart, 2 minutes in all; its partial message is freed. The
  peer's kernel answers the probes whatever its process does, so a live but slow,
  stopped (SIGSTOP) or back-pressured peer keeps its connection. A peer killed with
  SIGKILL, or that crashes, has its connection closed by its kernel at once.
* **ZMTP heartbeat** (opt-in, `heartbeat` seconds): the receiver PINGs each peer and
  closes a connection from which no complete message (or PONG) arrived within
  `heartbeat` seconds of a PING: this is what frees a live peer that stalls in the
  middle of a message. Its price, a limitation of libzmq (issue 2709): a connection is
  also closed while its messages wait because this receiver holds them back (its
  buffer is full and training paused: validation, a checkpoint) for longer than
  `heartbeat`, or while one message takes longer than that to transfer, and the
  messages in flight on it are lost (measured with libzmq 4.3.5: 12 of 2,000 messages
  with a 1 s timeout and a 5 s pause; none without heartbeats), so the simulations
  that sent them cannot finish here until a restart re-sends them. libzmq issues 3937
  and 4767 (open) report an assertion failure, which aborts the process, in the same
  situation. Enable it only with a timeout longer than any pause of training and any
  single transfer. For the same reason clients do not enable heartbeats (a PUSH
  socket's timeout fires while the receiver holds its messages back: measured, 2 of
  2,000 lost), nor does the receiver ask them to (``ZMQ_HEARTBEAT_TTL``).

After a connection is closed, ZeroMQ frees its partial message and the peer's
ZeroMQ reconnects and goes on with its next message; what it had in flight is lost.
A simulation that lost data this way re-sends it after a restart, and the exactly-once
dedup drops what had arrived already.

Memory held by connections, all of it inside ZeroMQ (the receiver's own bounds,
``max_pending`` and ``max_pending_bytes``, are on samples being reassembled):

* per connected peer: up to ``rcvhwm`` complete messages queued (the high-water mark
  is per connection: measured, 4 peers queued 4 x ``rcvhwm``), one more decoded and
  waiting for room, and the one being received, each frame at most
  ``max_message_bytes`` + `HEADER_ALLOWANCE` (``ZMQ_MAXMSGSIZE``; a larger one closes
  the connection), plus the kernel's socket buffers. A message of the protocol has at
  most a few frames (the Python client's BATCH messages: one per field).
* across peers: the receiver does not bound the number of connections (a bound
  ZeroMQ socket cannot refuse one); every client rank of every running simulation
  holds one, so the bound is connections x (``rcvhwm`` + 2) x frames per message x
  (``max_message_bytes`` + `HEADER_ALLOWANCE`). Lower ``rcvhwm`` and
  ``max_message_bytes`` for large fields or many client ranks.
* not bounded: ZeroMQ counts messages, not frames, so a peer that keeps sending frames
  of a message it never ends grows the receiver's memory as fast as it sends
  (measured: 300 frames of 1 MiB with ``rcvhwm`` = 1 held 300 MiB). A ZeroMQ client
  cannot do this (libzmq keeps an unfinished message on the sender's side); a peer
  speaking ZMTP by hand can, and no heartbeat stops it (each frame is traffic). Only
  who can reach the endpoint protects against it: bind a private interface (CURVE,
  as the receiver sets it up, authenticates the receiver, not its clients).
"""

from __future__ import annotations

import math

import zmq

from melissa_trainer.stream import protocol

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "HEADER_ALLOWANCE",
    "KEEPALIVE_COUNT",
    "KEEPALIVE_IDLE",
    "KEEPALIVE_INTERVAL",
    "check_heartbeat",
    "socket_options",
]

#: added to max_message_bytes for zmq.MAXMSGSIZE: any header, and the largest HELLO
HEADER_ALLOWANCE = protocol.MAX_HELLO_BYTES + 1024
#: seconds a new connection has to complete the ZMTP handshake
HANDSHAKE_TIMEOUT = 30.0
#: TCP keepalive: seconds of silence before the first probe, seconds between probes,
#: unanswered probes before the connection is closed
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 60, 10, 6
#: heartbeat bounds, in seconds: libzmq counts in milliseconds in a C int
MIN_HEARTBEAT, MAX_HEARTBEAT = 0.01, 86_400.0
#: PINGs per heartbeat timeout: a stalled peer is dropped 1 to 1.25 timeouts after its
#: last complete message
PINGS_PER_TIMEOUT = 4


def check_heartbeat(heartbeat: object) -> float | None:
    """`heartbeat` as seconds (None: off), or ValueError naming the option and the fix."""
    if heartbeat is None:
        return None
    if (
        isinstance(heartbeat, bool)
        or not isinstance(heartbeat, int | float)
        or not math.isfinite(heartbeat)
        or not MIN_HEARTBEAT <= heartbeat <= MAX_HEARTBEAT
    ):
        raise ValueError(
            f"heartbeat must be None (off) or a number of seconds in [{MIN_HEARTBEAT}, "
            f"{MAX_HEARTBEAT:.0f}], not {heartbeat!r}: it is how long a connection may "
            "stay without a complete message after a PING before it is closed"
        )
    return float(heartbeat)


def socket_options(max_message_bytes: int, heartbeat: float | None) -> dict[int, int]:
    """The receiver socket's size and liveness options (see the module docstring).

    Set before ``bind``: ZeroMQ applies them to the connections accepted afterwards.
    """
    options: dict[int, int] = {
        zmq.MAXMSGSIZE: max_message_bytes + HEADER_ALLOWANCE,
        zmq.HANDSHAKE_IVL: round(HANDSHAKE_TIMEOUT * 1000),
        zmq.TCP_KEEPALIVE: 1,
        zmq.TCP_KEEPALIVE_IDLE: KEEPALIVE_IDLE,
        zmq.TCP_KEEPALIVE_INTVL: KEEPALIVE_INTERVAL,
        zmq.TCP_KEEPALIVE_CNT: KEEPALIVE_COUNT,
    }
    if heartbeat is not None:
        timeout_ms = round(heartbeat * 1000)
        options[zmq.HEARTBEAT_IVL] = max(1, timeout_ms // PINGS_PER_TIMEOUT)
        options[zmq.HEARTBEAT_TIMEOUT] = timeout_ms
    return options
