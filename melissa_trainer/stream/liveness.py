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
* **A live peer that stops in the middle of a message** keeps its connection and its
  partial message, at most one frame of ``max_message_bytes`` + `HEADER_ALLOWANCE`,
  until it goes on (a suspended job that resumes completes its message: nothing is
  lost) or dies. A ZeroMQ client cannot stop there by hanging: its I/O thread sends
  the message whatever its other threads do, and libzmq keeps an unfinished
  multipart message on the sender's side. Only a stopped process (SIGSTOP, a
  suspended job) or a peer speaking ZMTP by hand can.

No ZMTP heartbeats (``ZMQ_HEARTBEAT_IVL``, ``_TIMEOUT``, ``_TTL``), on either side,
although they are what would close a live peer that stalls mid-message: libzmq
cancels a heartbeat timeout only when a complete message is decoded, so its timeout
also fires while a connection's messages wait because the receiver holds them back
(the buffer is full and training paused: validation, a checkpoint) or while one
message takes longer than the timeout to transfer (libzmq issue 2709). Measured with
libzmq 4.3.5 and a 5 s pause: with a 1 s timeout on the receiver, 12 of 2,000
messages were lost (2 of 2,000 with the timeout on the client's PUSH socket only);
with the `Receiver` held back 4 s, the process aborted (``Assertion failed: !_io_error
(src/stream_engine_base.cpp:310)``, libzmq issues 4364, 3937: open). Back-pressure
without loss is the stream's contract; a stalled peer costs one bounded frame.
``tests/stream/test_receiver_back_pressure.py`` and ``test_receiver_stalled_peers.py`` check
that this is still so.

After a connection is closed, ZeroMQ frees its partial message. A peer that lives on
(behind a network partition that heals) reconnects and goes on with its next message,
and what it had in flight on the closed connection is lost: a simulation that lost
data this way re-sends it after a restart, and the exactly-once dedup drops what had
arrived already.

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

import zmq

from melissa_trainer import wire as protocol

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "HEADER_ALLOWANCE",
    "KEEPALIVE_COUNT",
    "KEEPALIVE_IDLE",
    "KEEPALIVE_INTERVAL",
    "LISTEN_BACKLOG",
    "socket_options",
]

#: added to max_message_bytes for zmq.MAXMSGSIZE: any header, and the largest HELLO
HEADER_ALLOWANCE = protocol.MAX_HELLO_BYTES + 1024
#: seconds a new connection has to complete the ZMTP handshake
HANDSHAKE_TIMEOUT = 30.0
#: TCP keepalive: seconds of silence before the first probe, seconds between probes,
#: unanswered probes before the connection is closed
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 60, 10, 6
#: pending TCP connections the kernel queues for the socket (ZMQ_BACKLOG; capped by the
#: kernel's net.core.somaxconn). libzmq's default, 100, is too few when a study starts
#: hundreds of simulations at once: the kernel drops the other attempts and they retry
#: after 1 s, 3 s, ... (figures: docs/measured.md, "Design choices, measured").
LISTEN_BACKLOG = 4096


def socket_options(max_message_bytes: int) -> dict[int, int]:
    """The receiver socket's size and liveness options (see the module docstring).

    Set before ``bind``: ZeroMQ applies them to the connections accepted afterwards.
    """
    options: dict[int, int] = {
        zmq.MAXMSGSIZE: max_message_bytes + HEADER_ALLOWANCE,
        zmq.BACKLOG: LISTEN_BACKLOG,
        zmq.HANDSHAKE_IVL: round(HANDSHAKE_TIMEOUT * 1000),
        zmq.TCP_KEEPALIVE: 1,
        zmq.TCP_KEEPALIVE_IDLE: KEEPALIVE_IDLE,
        zmq.TCP_KEEPALIVE_INTVL: KEEPALIVE_INTERVAL,
        zmq.TCP_KEEPALIVE_CNT: KEEPALIVE_COUNT,
    }
    return options
