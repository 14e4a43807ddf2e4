"""Connections that close before their BYE: counted and logged, naming the simulation.

ZeroMQ closes a connection itself, in its I/O thread, when a frame announces more than the socket's
``ZMQ_MAXMSGSIZE`` (the receiver's ``max_message_bytes`` + `liveness.HEADER_ALLOWANCE`: the bound
on what one frame may make the receiver allocate). The message never reaches the receiver, nor do
the messages the peer had queued behind it on that connection; the peer reconnects and goes on. No
error, and the only trace is the socket monitor's ``DISCONNECTED`` event, the same one a peer's own
close gives (measured with libzmq 4.3.5: no event tells the two apart). So a message of 2 GiB to a
receiver of the default 1 GiB bound vanished without a trace, where one of 1 GiB (under the frame
bound, over the field bound) is decoded, rejected (``too_large``) and logged.

`ConnectionWatch` reads the monitor's ``DISCONNECTED`` events in the receiver's ingester (below:
why not in a thread of its own). The receiver tells it, from each HELLO and BYE (rare messages:
nothing is added to the data path), which simulation's client rank sends on which connection
(ZeroMQ's ``SRCFD``, the descriptor of the connection a message came on). A connection that closes
after a HELLO and before that rank's BYE is counted (telemetry ``connections_lost``) and logged
with the simulation, the rank and both causes: the process ended without its BYE (killed, crashed,
or exited without closing its client: the launcher sees those too), or it sent a frame over the
bound. Either way what it had queued on that connection is lost; a restart of the simulation
re-sends it (exactly once holds). A sender that connects without a HELLO cannot be named: its
closes are not counted; nor those of a connection whose HELLO was refused (`hello`'s `refused`:
every message of a simulation unknown here is rejected, nothing of the study's is lost; a DEBUG
line, the refusal warned of already; a user trial was warned of a loss). A connection that closes
before the receiver has read its HELLO (a client that said HELLO, sent and exited, or an oversized
frame right behind the HELLO, while the receiver was busy) is counted when its HELLO is read: the
close of no owner is remembered by descriptor until the socket is found empty, and a HELLO read on
that descriptor is attributed to it in the order of the events, even when the next connection was
accepted on the descriptor before that HELLO was read (`hello`).

A close is judged only once the receiver has read what came before it. ZeroMQ's I/O thread reads a
connection ahead of the receiver: a simulation that said BYE and exited normally has its close seen
while its BYE (and the data before it) may still wait in the socket's queue, for as long as the
receiver is busy or waits for room in the buffer. Judged at once, as it was, that close counted as
lost and was warned of. The messages a connection delivered are in the socket's queue before its
``DISCONNECTED`` event is emitted (libzmq flushes what it decoded before reading further; the queue
keeps them after the close, up to its end marker). So a close awaits (`pending`, logged at DEBUG)
until the receiver finds its socket empty (`settle`, from its idle path: no cost per message): by
then every message that connection sent has been read, and a BYE read in between (matched by
simulation and rank, `bye`) settles it as the client's own. Under a stream that never leaves the
socket empty, a loss is counted late, at the first empty poll (the receiver keeps reading after the
end of the stream, until `stop`), or at `close`.

How each judged close is said (and counted): `connection_lines`. In short: the study's
own kills (`study_stops`, called by `Study.stop` before its launcher kills them, while
the receiver still runs), and the closes once the receiver has ended or is stopping, are
summarised in one INFO line at `close`; a close after this receiver failed its
simulation for NaN or Inf (``nonfinite="fail"``: its ledger's ``nonfinite_failures``
grew since its HELLO) is the launcher's kill, one INFO line, as is one after rank 0's
receiver failed it so (on another rank, `heard_kills`: `stream.nonfinite_kills`); one that
carried nothing since its HELLO, one INFO line; any other is warned of (the causes in
full once; naming rank 0's failure for NaN of its simulation before, if any). Whether
a close is the study's is decided when its event is read (below), not when it is judged:
a solver that died on its own before the stop, its close read before it and judged after
it, is still warned of.

Every rank hears the kills; rank 0 alone runs the launcher: how a rank's watch knows that a close
it reads is one of the study's kills: `stream.study_stops`.

Events and HELLOs are ordered in one thread. An event names a connection by its descriptor, which
the kernel gives to the next connection once ZeroMQ has closed it. When the events were read by a
thread of the watch's own, a simulation that said BYE and exited, and the next one, accepted on the
same descriptor, whose HELLO was read before that thread read the first one's close, had that close
taken for its own: it was judged lost at the next empty socket (a user trial: a false WARNING and
``connections_lost`` 1 in 2 of 20 studies on a busy machine, every sample received). Nor can a
HELLO tell a new connection on a reused descriptor from the same connection said HELLO on again (a
worker's next simulation). libzmq emits a connection's ``DISCONNECTED`` before it closes its
descriptor, so before any reuse, and a new connection's messages are readable only after that. So
the ingester reads every event waiting in the monitor (`_drain`: without waiting) before it
registers a HELLO, at a BYE, and before it judges (`settle`, at each empty poll: one ``ZMQ_EVENTS``
read when no event waits): a close read after a HELLO on its descriptor is then that HELLO's
connection's, or a later one's. Whether a close is the study's is decided when the ingester reads
its event: at the first HELLO, BYE or empty poll after it (the receiver's poll interval at most
while the socket is empty, later while it is kept busy). The monitor's queue has no bound
(``RCVHWM`` 0: events left unread while the ingester is busy never stall the socket; one small
message per close).

Connection attempts refused in their handshake (a client without the receiver's CURVE key, a
socket that cannot send to a PULL, a port probe) are the monitor's too: `handshakes`.

Thread-safety: `hello`, `bye`, `settle` and `owner_of` are called by the receiver's ingester
(whoever holds its lock, which orders its use of the monitor socket across threads), `close` once
it has ended; `pending` and `study_stops` by any thread (a read, a flag).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Protocol, cast

import zmq
from zmq.utils.monitor import parse_monitor_message

from melissa_trainer.stream.connection_lines import CloseLines
from melissa_trainer.stream.handshakes import EVENTS as HANDSHAKE_EVENTS
from melissa_trainer.stream.handshakes import HandshakeWatch
from melissa_trainer.wire import Bye, Hello

__all__ = ["ConnectionWatch"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

_POLLIN = int(zmq.POLLIN)
_EVENTS = HANDSHAKE_EVENTS | zmq.EVENT_DISCONNECTED
#: the monitors' inproc addresses, one per socket for the process's life (not `id()`:
#: reused once freed, while the old endpoint may still be bound in the context)
_MONITOR_IDS = itertools.count()


class Ledger(Protocol):
    """What the watch reads of a simulation's ledger here (`step_ledger.StepLedger`)."""

    #: DATA and BATCH messages of the simulation received so far
    messages: int
    #: its attempts failed here for NaN or Inf (a launcher kills each)
    nonfinite_failures: int
    #: its client ranks that asked a receipt (a close waiting for its BYE's confirmation)
    asked: set[int]


#: a connection's simulation ledger, its message and failure counts at the connection's HELLO
#: (None: no ledger given, the close judged as one that may have carried data)
_Since = tuple[Ledger, int, int] | None


class ConnectionWatch:
    """Counts and logs the connections of `socket` that close between a client rank's
    HELLO and its BYE (module docstring). `count` is called with each one (from the
    ingester, in `settle`); `frame_bound` is the socket's ``ZMQ_MAXMSGSIZE``, for the
    log. `quiet` says the receiver ends or stops, `announced` that rank 0 said its study
    stops (`study_stops_announced`): a close read while either is true is the study's.
    `heard_kills` (a rank other than 0, under ``nonfinite="fail"``): how many times rank
    0's receiver failed a simulation for NaN or Inf (`NonfiniteKills.failures`), read at
    a HELLO and at its connection's close: grown, the close is the launcher's kill."""

    def __init__(
        self,
        socket: zmq.Socket,
        frame_bound: int,
        count: Callable[[], None],
        quiet: Callable[[], bool] = lambda: False,
        announced: Callable[[], bool] = lambda: False,
        label: str = "",
        heard_kills: Callable[[int], int] | None = None,
    ) -> None:
        self._socket, self._quiet, self._announced = socket, quiet, announced
        self._label = label  # (" (receiver of rank N)" under several ranks: whose words)
        self._heard_kills = heard_kills
        self._heard_at: dict[int, int] = {}  # fd -> rank 0's failures of its sim at HELLO
        # what is said of each judged close, and its count (`connection_lines`)
        self._lines = CloseLines(frame_bound, count, label)
        self._study_stops = False  # `study_stops`: closes from now on are the study's
        self._owners: dict[int, tuple[int, int]] = {}  # fd -> (simulation, client rank)
        self._since: dict[int, _Since] = {}  # fd -> its ledger's count at its HELLO
        self._refused: dict[int, tuple[int, int]] = {}  # fd -> owner of a refused HELLO
        #: descriptor -> closes read on it with no owner (no HELLO read yet, or its BYE
        #: read), not yet matched by a HELLO, since the socket was last found empty: a
        #: HELLO read on it may be of one of those closed connections (`hello`)
        self._gone: dict[int, int] = {}
        #: descriptors of a connection accepted and not read closed (`_drain`)
        self._open: set[int] = set()
        #: descriptors whose owner's HELLO was read while a close of no owner on it was
        #: pending: that HELLO may be the closed connection's (`hello`)
        self._doubt: set[int] = set()
        # (simulation, client rank) of the connections seen closed whose BYE was not read
        # yet, in the order of their events: judged by `settle`; with each, whether it
        # was seen as the study stopped (`_at_stop`: "stop", summarised, not warned of),
        # after a failure for NaN or Inf here ("nonfinite": the kill, one line) or on rank
        # 0 ("rank 0"), of a simulation rank 0 failed so before ("before": warned of,
        # naming it), or none of these ("")
        self._closed: list[tuple[int, int]] = []
        self._at_stop: list[str] = []
        self._closed_since: list[_Since] = []
        #: connection attempts refused in their handshake (`handshakes`)
        self.handshakes = HandshakeWatch(socket, label)
        # (`Socket.get_monitor_socket`'s, with RCVHWM 0 on the reading end: libzmq then
        # leaves the inproc pipe unbounded. With the default HWMs, about 2000 closes left
        # unread stalled the receiver's socket (libzmq 4.3.5, measured: 1500 read, 2100
        # hung); the ingester reads them only at its next HELLO, BYE or empty poll)
        address = f"inproc://melissa-receiver-monitor-{next(_MONITOR_IDS)}"
        socket.monitor(address, _EVENTS)
        monitor = socket.context.socket(zmq.PAIR)
        monitor.rcvhwm = 0
        monitor.connect(address)
        self._monitor: zmq.Socket | None = monitor  # None once `close`d

    @property
    def pending(self) -> int:
        """Closes read whose BYE was not read yet, awaiting `settle` (any thread)."""
        return len(self._closed)

    def study_stops(self) -> None:
        """The study is about to stop its simulations (any thread; `Study.stop`, before
        its launcher kills them): the connections seen closing without a BYE from now on
        are counted, and summarised in one line at `close` instead of a warning each."""
        self._study_stops = True

    def hello(
        self, frame: zmq.Frame, msg: Hello, ledger: Ledger | None = None, refused: bool = False
    ) -> None:
        """A HELLO came on `frame`'s connection (the ingester). The closes emitted before
        it was read are read first: a close of an earlier connection on the same
        descriptor is then never taken for this one's (module docstring). `ledger`: its
        simulation's here, once the HELLO is ingested (None: not known), whose count tells a
        close that carried nothing after this HELLO. `refused`: the HELLO was refused, its
        simulation has no ledger here: its close is not counted (module docstring)."""
        self._drain()
        fd, owner = frame.get(zmq.SRCFD), (msg.simulation_id, msg.client_rank)
        self.handshakes.hello(fd)  # (its handshake succeeded: it sent a message)
        # Its own close read already (a client that said HELLO, sent and exited while the
        # ingester was busy: its HELLO still queued when its DISCONNECTED was drained),
        # read then as a close of no owner: neither counted nor judged, a client rank
        # lost uncounted at one receiver (`tests/stream/test_close_before_hello.py`).
        # libzmq emits a descriptor's events in order (a close before the ACCEPTED of its
        # reuse), and a connection's messages reach the socket after its ACCEPTED and
        # before its close: so with every connection on this descriptor read closed, the
        # HELLO is one of theirs. With one open (accepted since), it may be the open
        # one's or a closed one's (`_doubt`): taken for the open one's (a port probe, a
        # client's dial without a HELLO, or a connection whose BYE was read, closes with
        # no owner too), until a second HELLO comes on the descriptor, its BYE not read
        # (a client rank says HELLO once per connection, `twin_hellos`; a restarted
        # attempt of the same simulation and rank, or another simulation, on a new one):
        # the first was then the closed connection's (read before, as it was queued
        # before), judged closed now (`tests/stream/test_close_before_hello_reused.py`).
        gone = self._gone.get(fd, 0)
        closed = bool(gone) and fd not in self._open
        earlier = self._owners.get(fd)
        if closed or (not refused and fd in self._doubt and earlier is not None):
            if gone > 1:
                self._gone[fd] = gone - 1
            else:
                self._gone.pop(fd, None)
            if not closed:  # (the earlier HELLO's connection: judged as any close)
                self._disconnected(fd)
        if refused:  # (a connection already named keeps its name)
            if fd not in self._owners and not closed:
                self._refused[fd] = (msg.simulation_id, msg.client_rank)
            return
        self._refused.pop(fd, None)
        self._owners[fd] = owner
        if not closed and fd in self._gone:
            self._doubt.add(fd)
        else:
            self._doubt.discard(fd)
        self._since[fd] = (
            None if ledger is None else (ledger, ledger.messages, ledger.nonfinite_failures)
        )
        if self._heard_kills is not None:  # (an open; the file read only when it changed)
            self._heard_at[fd] = self._heard_kills(msg.simulation_id)
        if closed:  # judged as any close, at the next empty socket (its data read by then)
            self._disconnected(fd)

    def owner_of(self, fd: int) -> tuple[int, int] | None:
        """(simulation, client rank) of open connection `fd`, its HELLO read and no BYE
        (the ingester: its close not read yet counts as open)."""
        return self._owners.get(fd)

    def bye(self, frame: zmq.Frame, msg: Bye) -> None:
        """A BYE came on `frame`'s connection: its close is the client's own (the
        ingester). Matched by simulation and rank, not by descriptor alone: the BYE of
        a connection already seen closed may come after its descriptor was reused."""
        self._drain()  # (not needed for the match: keeps the events read promptly)
        owner, fd = (msg.simulation_id, msg.client_rank), frame.get(zmq.SRCFD)
        if self._owners.get(fd) == owner:
            del self._owners[fd], self._since[fd]
            self._heard_at.pop(fd, None)
            self._doubt.discard(fd)  # (its connection's, or a closed one's: its own end)
        elif owner in self._closed:
            i = self._closed.index(owner)  # (the first: the oldest such close)
            del self._closed[i], self._at_stop[i], self._closed_since[i]

    def settle(self, empty: Callable[[], bool]) -> None:
        """Read the closes waiting in the monitor, then judge those read so far if
        `empty()` (called after they are read) says the socket holds no message: every
        message their connections sent was then read, BYE included; those without one
        are counted and logged. Called by the ingester after each empty poll; without
        an event waiting nor a close pending, one ``ZMQ_EVENTS`` read. Blocks for a
        `zmq_poll` of 0 ms at most."""
        self._drain()
        n = len(self._closed)
        if not (n or self._gone) or not empty():  # (the closes read before it is empty)
            return
        # every message of the closes of no owner read is read: none has a HELLO to come
        self._gone.clear()
        if not n:
            return
        lost, self._closed[:n] = self._closed[:n], []
        at_stop, self._at_stop[:n] = self._at_stop[:n], []
        since, self._closed_since[:n] = self._closed_since[:n], []
        for (sid, rank), stopped, was in zip(lost, at_stop, since, strict=True):
            if stopped == "stop":
                self._lines.stopped(sid)
            elif stopped in ("nonfinite", "rank 0"):
                self._lines.killed(sid, rank, here=stopped == "nonfinite")
            elif was is not None and was[0].messages == was[1]:
                self._lines.carried_nothing(sid, rank)
            else:
                asked = was is not None and rank in was[0].asked
                self._lines.lost(sid, rank, failed_before=stopped == "before", asked=asked)

    def close(
        self, empty: Callable[[], bool] | None = None, fate: Callable[[int], str] | None = None
    ) -> None:
        """Read the closes waiting, stop and close the monitor (before the socket is
        closed), then settle what is pending if `empty` is given (`settle`), and log
        the summary of the closes that were the study's (`study_stops`), if any, and
        the count of those warned of, with what became of them (`fate`: `CloseLines.close`).
        The caller owns the watch and the socket: the ingester has ended (or never ran).
        Idempotent."""
        monitor = self._monitor
        if monitor is None:
            return
        self._drain()
        self._monitor = None
        try:
            self._socket.disable_monitor()
        except zmq.ZMQError as exc:  # the socket is being closed anyway
            logger.debug("disabling the receiver's monitor: %s", exc)
        monitor.close(linger=0)
        if empty is not None:
            self.settle(empty)
        self._lines.close(self._study_stops, fate)
        self.handshakes.close()

    def _drain(self) -> None:
        """Read every event waiting in the monitor, without waiting (the ingester)."""
        monitor = self._monitor
        if monitor is None:
            return
        while cast(int, monitor.get(zmq.EVENTS)) & _POLLIN:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:  # pragma: no cover - ZMQ_EVENTS said one waits
                return
            event = parse_monitor_message(frames)  # (ZeroMQ's, not ours)
            kind, value = event["event"], int(event["value"])  # (a descriptor, or an errno)
            if kind == zmq.EVENT_DISCONNECTED:
                self.handshakes.disconnected(value, event["endpoint"], self._stopping)
                self._open.discard(value)
                self._disconnected(value)
            else:
                if kind == zmq.EVENT_ACCEPTED:  # a new connection on that descriptor
                    self._open.add(value)
                self.handshakes.event(kind, value)

    def _disconnected(self, fd: int) -> None:
        # the study's own stop (this rank's `study_stops`, or rank 0's word read for a
        # close of a named connection), or the receiver's: judged when the event is read
        # (a close read before, judged after, is the simulation's own: warned of)
        owner = self._owners.pop(fd, None)  # (none: its BYE was read, or no HELLO yet)
        if owner is None:
            if fd in self._refused:  # (not counted: module docstring)
                said = "simulation %d client rank %d: connection closed; its HELLO was refused%s"
                logger.debug(said, *self._refused.pop(fd), self._label)
            else:  # (a HELLO still queued on it may be this connection's: `hello`)
                self._gone[fd] = self._gone.get(fd, 0) + 1
            return
        self._doubt.discard(fd)  # (closed: whichever connection its HELLO came on)
        since = self._since.pop(fd)
        self._closed_since.append(since)
        at_stop = self._stopping()
        self._closed.append(owner)
        failed = since is not None and since[0].nonfinite_failures > since[2]
        self._at_stop.append("stop" if at_stop else "nonfinite" if failed else "")
        heard = self._heard_at.pop(fd, None)
        if self._heard_kills is not None and heard is not None and not self._at_stop[-1]:
            now = self._heard_kills(owner[0])  # (written before the kill: seen after it)
            self._at_stop[-1] = "rank 0" if now > heard else "before" if now else ""
        logger.debug(
            "simulation %d client rank %d: connection closed; lost unless its BYE "
            "is still queued (judged once the socket is found empty)",
            *owner,
        )

    def _stopping(self) -> bool:
        """Whether a close read now is the study's stop's or the receiver's end's."""
        if not self._study_stops and self._announced():
            self._study_stops = True  # (latched: the file is not read again)
        return self._study_stops or self._quiet()
