"""The events of each data socket's monitor, read (`HandshakeEvents`, the base of
`handshake.Handshakes`, whose module docstring says why and what the reads are for):
a monitor set up before its socket connects (`watch`), and what its events say, kept
per socket: the handshake accepted or refused (and how), a connection ever accepted,
a TCP peer that never completed a ZeroMQ handshake, and since when the connection is
down (`down_since`, told back to the time the first event said it, as events are read
late). ZeroMQ allows one monitor per socket: this is its one reader.

Not thread-safe: used by the client's thread only.
"""

from __future__ import annotations

import itertools
import struct
import time

import zmq

from melissa_trainer.client.handshake_timing import NOT_ZMQ_AFTER, timeout_bound
from melissa_trainer.client.handshake_words import ENV, KEYED

__all__ = ["DOWN", "UP", "HandshakeEvents"]

#: events that say a connection is up, and that it is down: `down_since`. Down is a
#: connection lost or an attempt that failed (CLOSED, then CONNECT_RETRIED), as the C
#: client's (clients/c/src/handshake.c); not CONNECT_DELAYED, a connect in progress (every
#: TCP connect's first step, CONNECTED follows in microseconds on a loaded node too):
#: counted down, a close after a failure (``disconnected_timeout`` 0) that read it before
#: CONNECTED gave up on a receiver connecting at once, "unreachable"
#: (tests/client/test_connect_in_progress.py). A first connect that hangs (a host gone
#: or wrong: its SYNs unanswered) counts down once ZeroMQ abandons it, after the socket's
#: ZMQ_CONNECT_TIMEOUT (``disconnected_timeout``: `sockets.connect_timeout_ms`), down since
#: the socket connected (tests/client/test_connect_timeout.py).
UP = (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED)
DOWN = (zmq.EVENT_DISCONNECTED, zmq.EVENT_CONNECT_RETRIED, zmq.EVENT_CLOSED)
_WATCHED = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
for _event in (*UP, *DOWN, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
    _WATCHED |= _event
_EVENT = struct.Struct("=HI")  # a monitor event's first frame: the event, its value
#: the monitors' inproc addresses, one per socket for the process's life (an `id()` is
#: reused, a closed socket's may stay bound: tests/client/test_handshake_monitor_names.py)
_MONITOR_IDS = itertools.count()


class HandshakeEvents:
    """Each data socket's monitor and what its events said (module docstring)."""

    def __init__(self, whose: str = "", key_from: str = ENV) -> None:
        """`whose`: "simulation S rank R", which its warning leads with (the C client's
        does), or "" for none. `key_from`: where the sockets' CURVE key came from
        (`handshake_words.KEYED`'s keys), which a refusal's words name with its fix."""
        self._whose = f"{whose}: " if whose else ""
        self._keyed_words = KEYED[key_from]
        self._monitors: list[zmq.Socket] = []
        self._sockets: list[zmq.Socket] = []
        self._keyed: list[bool] = []
        self._accepted: list[bool] = []
        self._ever: list[bool] = []  # a connection was accepted once (`never_connected`)
        self._undetailed: list[int] = []
        #: per socket, when its first TCP connection was accepted, while no handshake
        #: ever completed (`not_receivers`); whether that was warned of (once)
        self._tcp_at: list[float | None] = []
        #: per socket, when it was watched (just before its connect: `pending`'s words)
        self._watched_at: list[float] = []
        self._zmtp: list[bool] = []
        #: per socket, the silence (s since `_tcp_at`) at which `warn` speaks next
        #: (0: not warned yet)
        self._warn_due: list[float] = []
        self._refusal: list[tuple[int, int] | None] = []  # the failure's event, value
        #: per socket, when the first event saying that its connection is down was read
        #: (`time.monotonic()`), since one said it up (None: up, or not known down)
        self.down_since: list[float | None] = []
        #: per socket, the reconnection intervals (ms) announced since it went down, all
        #: but the last (`_read`: how long ago it went down, read late)
        self._retried_ms: list[int] = []
        self._last_ms: list[int] = []
        #: when a read last found each monitor empty; since when its connection may be up
        self._drained: list[float] = []
        self._opened: list[float | None] = []
        #: per socket, `timeout_bound` as read at its last CONNECTED
        self._bound: list[float] = []

    def watch(self, sock: zmq.Socket, keyed: bool) -> None:
        """Monitor `sock` (not connected yet; `keyed`: it has a CURVE server key)."""
        # A monitor's queue full blocks libzmq's I/O thread (every socket of the
        # context: tests/client/test_monitor_unread.py): unbounded instead (RCVHWM 0
        # before connecting), a few small events per reconnection while nothing reads.
        address = f"inproc://melissa-trainer.handshake.{next(_MONITOR_IDS)}"
        sock.monitor(address, _WATCHED)
        monitor = sock.context.socket(zmq.PAIR)
        monitor.rcvhwm = 0
        monitor.connect(address)
        self._monitors.append(monitor)
        self._sockets.append(sock)
        self._keyed.append(keyed)
        self._watched_at.append(time.monotonic())
        self._drained.append(self._watched_at[-1])
        for flags in (self._accepted, self._ever, self._zmtp):
            flags.append(False)
        self._warn_due.append(0.0)
        for unknown in (self._tcp_at, self._refusal, self.down_since, self._opened):
            unknown.append(None)
        for count in (self._undetailed, self._retried_ms, self._last_ms):
            count.append(0)
        self._bound.append(NOT_ZMQ_AFTER)

    def _read(self, index: int) -> None:
        monitor = self._monitors[index]
        floor = self._drained[index]  # (the earliest time of the next event read)
        while True:
            before = time.monotonic()
            if not monitor.poll(0):
                self._drained[index] = before
                break
            event, value = _EVENT.unpack_from(monitor.recv_multipart()[0])
            if event == zmq.EVENT_CONNECTED:
                self._opened[index] = floor
                self._bound[index] = timeout_bound(self._sockets[index])
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                opened, self._opened[index] = self._opened[index], None
                bound = self._bound[index]
                if opened is not None and time.monotonic() - opened >= bound:
                    floor = max(floor, opened + bound)  # (a timeout: not counted)
                    continue
            if event in UP:
                self.down_since[index] = None
                self._ever[index] = True
                if self._tcp_at[index] is None:
                    self._tcp_at[index] = time.monotonic()
            elif event in DOWN and self.down_since[index] is None:
                # (a socket never connected has had no connection since it connected:
                # its first attempt failing after the connect timeout, `sockets.
                # connect_timeout_ms`, is down since then, not since the failure)
                ever = self._ever[index]
                self.down_since[index] = time.monotonic() if ever else self._watched_at[index]
                self._retried_ms[index] = self._last_ms[index] = 0
            if event == zmq.EVENT_CONNECT_RETRIED and self.down_since[index] is not None:
                self._retried_ms[index] += self._last_ms[index]
                self._last_ms[index] = value
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._accepted[index], self._undetailed[index] = True, 0
                self._zmtp[index], self._refusal[index], self._opened[index] = True, None, None
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                self._undetailed[index] += 1
                # (without a key, after a completed handshake: a trainer dying, which
                # PeerWatch reads; with one, a trainer restarted with another key. A
                # refusal with detail is kept: a mismatch is not "not a receiver")
                had = self._refusal[index]
                detailed = had is not None and had[0] != event
                if self._undetailed[index] >= 2 and (self._keyed[index] or not self._zmtp[index]):
                    self._accepted[index] = False
                    if not detailed:
                        self._refusal[index] = (event, value)
            elif event not in UP + DOWN:  # (a failure with detail: certain at once)
                self._accepted[index], self._refusal[index] = False, (event, value)

        since = self.down_since[index]
        if since is not None:
            # Events carry no time, and are read late. ZeroMQ announces each
            # reconnection's interval from the disconnection on: all but the last have
            # passed (at most one interval, RECONNECT_IVL with its jitter, late).
            self.down_since[index] = min(since, time.monotonic() - self._retried_ms[index] / 1000)

    def read(self) -> None:
        """Read every socket's events that came (never blocks)."""
        for index in range(len(self._monitors)):
            self._read(index)

    def spoke(self, index: int) -> bool:
        """Whether a ZeroMQ handshake ever completed on socket `index` (events read)."""
        return self._zmtp[index]

    def accepted(self) -> bool:
        """Whether every receiver accepted its handshake (as the events read say)."""
        return all(self._accepted)

    def close(self) -> None:
        """Stop the monitors and close their sockets (before the data sockets)."""
        for sock, monitor in zip(self._sockets, self._monitors, strict=True):
            if not sock.closed:
                sock.disable_monitor()
            monitor.close(linger=0)
        self._monitors, self._sockets = [], []
