"""The monitor events of a `Predictor`'s socket to its serving rank (`predict_link`),
read without blocking, with the handshakes that libzmq timed out told apart.

libzmq ends a handshake that its peer never answers after ``ZMQ_HANDSHAKE_IVL`` (30 s
by default) with a failure WITHOUT a detail, as a server closing on a key it does not
hold does in milliseconds: a peer that accepts TCP and never speaks (another program,
``python -m http.server``) or a serving trainer whose process is stopped (SIGSTOP, a
suspended job: its kernel accepts, its libzmq is frozen) is not a refusal. As the data
sockets' rule (`client.handshake`, whose `timeout_bound` this uses): a failure that may
end a connection `timeout_bound` s old or more is a timeout (`TIMED_OUT` here). Events
carry no time: a connection began no earlier than the last read that found the monitor
empty before its CONNECTED, and each failure let off puts later events the bound later,
so at most one per bound is let off (a key refused at each reconnection still counts).

A connection attempt that libzmq abandons at the socket's ``ZMQ_CONNECT_TIMEOUT`` (a
host that never answers: its SYNs dropped) posts the events of one refused at once
(CLOSED, then CONNECT_RETRIED): they are told apart by the attempt's length, from its
CONNECT_DELAYED (a connect in progress) to its CONNECT_RETRIED. One that lasted half the
bound or more (at least 1 s: the bound is 2 s at least, `sockets.connect_timeout_ms`) is
`NO_ANSWER`; a refusal (an RST) comes within a round trip. The length is the least the
events allow (the retry posted no earlier than the last read that found the monitor
empty, the attempt begun before its CONNECT_DELAYED was read: a wait polls the monitor
at most `DRAIN` s at a time while a connect is in progress, `connecting`), so a burst
read at once (a request after a trainer died between requests) is refused, as it is.
The C client's predict_watch.c reads its events by the same rules. Imports pyzmq and
`client.handshake` only.
"""

from __future__ import annotations

import struct
import time

import zmq

from melissa_trainer.client.handshake_timing import timeout_bound

__all__ = ["DRAIN", "NO_ANSWER", "TIMED_OUT", "ServeEvents"]

#: what `ServeEvents.read` gives for a handshake failure that libzmq's timeout may have
#: caused (not a monitor event: ZeroMQ's are bit flags > 0)
TIMED_OUT = -1
#: what `ServeEvents.read` gives for a connection attempt abandoned at the socket's
#: ZMQ_CONNECT_TIMEOUT (the host never answered), in place of its CONNECT_RETRIED
NO_ANSWER = -2
#: the longest poll of a wait while a connect is in progress (seconds): the monitor,
#: found empty that often, dates the end of the attempt (`read`'s floor) that closely
DRAIN = 0.1


class ServeEvents:
    """The events of `monitor`, the monitor of `sock` (watching CONNECTED too), from
    before `sock` connected; `timed_out`: how many handshakes were let off."""

    def __init__(self, sock: zmq.Socket, monitor: zmq.Socket) -> None:
        self._sock, self._monitor = sock, monitor
        self._drained = time.monotonic()  # when a read last found the monitor empty
        self._opened: float | None = None  # since when the connection may be up
        self._bound = timeout_bound(sock)
        self._after_timeout = False  # (its DISCONNECTED, CONNECT_RETRIED: left out)
        self.timed_out = 0
        #: the socket's ZMQ_CONNECT_TIMEOUT (seconds; 0: none, the kernel's)
        self.connect_bound = int(sock.getsockopt(zmq.CONNECT_TIMEOUT)) / 1000
        #: when it was dialled (this object is made as it connects), and whether its host
        #: ever answered (a connection made, or an attempt failed: refused or abandoned)
        self.dialled, self.answered = time.monotonic(), False
        self._dialling: float | None = None  # a connect in progress: read when (DELAYED)
        #: a handshake failed with ZeroMQ's detail of a mechanism mismatch (CURVE on one
        #: side only): with a key here, the server takes no CURVE (`predict_errors`)
        self.mismatched = False

    def silent(self, timed_out: int, went_silent: bool = False) -> bool:
        """Whether the peer looks silent: a handshake timed out since `self.timed_out`
        was `timed_out`, or a connection is up now (as `read` left it) without a
        handshake and is `timeout_bound` s old, or younger but to a peer that
        `went_silent` at an earlier request (its connection up, no answer: a stopped
        trainer; a request's timeout under the bound never ages a connection that
        far, and each failure closes it)."""
        opened = self._opened
        late = opened is not None and (went_silent or time.monotonic() - opened >= self._bound)
        return self.timed_out > timed_out or late

    @property
    def connecting(self) -> bool:
        """Whether a connect is in progress (its CONNECT_DELAYED read, not its end)."""
        return self._dialling is not None

    def unanswered(self) -> float | None:
        """Seconds since the socket was dialled when its host never answered (no
        connection made, no attempt refused; as `read` left it) for half the connect
        bound or more (the rule of `NO_ANSWER`: a shorter wait, a request's short
        timeout, says nothing of the host: a first SYN lost is sent again after 1 s),
        else None."""
        waited = time.monotonic() - self.dialled
        late = bool(self.connect_bound) and waited >= self.connect_bound / 2
        return waited if late and not self.answered else None

    def read(self) -> list[int]:
        """The events that came (never blocks), in order; a handshake failure without
        detail that may be libzmq's timeout is `TIMED_OUT`, and the DISCONNECTED and
        CONNECT_RETRIED that follow it are left out (the peer is there: not a refusal,
        not a trainer gone). A CONNECTED is kept; it opens a connection (`silent`). A
        failure with the detail of a mechanism mismatch sets `mismatched`. A connection
        attempt abandoned at the connect bound is `NO_ANSWER` (module docstring); a
        CONNECT_DELAYED is left out (`unanswered`)."""
        floor, events = self._drained, list[int]()
        while True:
            before = time.monotonic()
            if not self._monitor.poll(0):
                self._drained = before
                return events
            event, value = struct.unpack("=HI", self._monitor.recv_multipart()[0][:6])
            if event == zmq.EVENT_CONNECT_DELAYED:  # (a connect in progress)
                self._dialling = time.monotonic()
                continue
            began = self._dialling  # (the attempt that this CONNECTED, RETRIED ends)
            if event in (zmq.EVENT_CONNECTED, zmq.EVENT_CONNECT_RETRIED):
                self._dialling = None
            if event == zmq.EVENT_CONNECTED:
                self.answered = True
                self._opened, self._bound = floor, timeout_bound(self._sock)
                self._after_timeout = False
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                opened, self._opened = self._opened, None
                if opened is not None and time.monotonic() - opened >= self._bound:
                    floor = max(floor, opened + self._bound)
                    self.timed_out += 1
                    events.append(TIMED_OUT)
                    self._after_timeout = True
                    continue
            elif event == zmq.EVENT_DISCONNECTED:
                self._opened = None
                if self._after_timeout:
                    continue
            elif event == zmq.EVENT_CONNECT_RETRIED and self._after_timeout:
                self._after_timeout = False
                continue
            elif event == zmq.EVENT_CONNECT_RETRIED:
                self._opened = None
                lasted = 0.0 if began is None else floor - began  # (the least it lasted)
                if self.connect_bound and lasted >= self.connect_bound / 2:
                    events.append(NO_ANSWER)  # (abandoned at the bound: no answer)
                    continue
                self.answered = True  # (refused: the host answered, its RST)
            else:
                self._opened = None  # (a failure with detail ends the connection)
                if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                    mismatch = value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                    self.mismatched = self.mismatched or mismatch
            events.append(event)
