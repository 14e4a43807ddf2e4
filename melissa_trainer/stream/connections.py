"""Connections that close before their BYE: counted and logged, naming the simulation.

ZeroMQ closes a connection itself, in its I/O thread, when a frame announces more than
the socket's ``ZMQ_MAXMSGSIZE`` (the receiver's ``max_message_bytes`` +
`liveness.HEADER_ALLOWANCE`: the bound on what one frame may make the receiver
allocate). The message never reaches the receiver, nor do the messages the peer had
queued behind it on that connection; the peer reconnects and goes on. No error, and
the only trace is the socket monitor's ``DISCONNECTED`` event, the same one a peer's
own close gives (measured with libzmq 4.3.5: no event tells the two apart). So a
message of 2 GiB to a receiver of the default 1 GiB bound vanished without a trace,
where one of 1 GiB (under the frame bound, over the field bound) is decoded, rejected
(``too_large``) and logged.

`ConnectionWatch` reads the monitor's ``DISCONNECTED`` events in a thread of its own.
The receiver tells it, from each HELLO and BYE (rare messages: nothing is added to the
data path), which simulation's client rank sends on which connection (ZeroMQ's
``SRCFD``, the descriptor of the connection a message came on). A connection that
closes after a HELLO and before that rank's BYE is counted (telemetry
``connections_lost``) and logged with the simulation, the rank and both causes: the
process ended without its BYE (killed, crashed, or exited without closing its client:
the launcher sees those too), or it sent a frame over the bound. Either way what it
had queued on that connection is lost; a restart of the simulation re-sends it
(exactly once holds). A sender that connects without a HELLO cannot be named: its
closes are not counted; nor are those of a connection that closes before the receiver
has read its HELLO (an oversized frame right behind the HELLO, read by ZeroMQ's I/O
thread while the receiver is busy): the simulation's data is then still in the
socket's queue or lost with the connection, and the launcher's record of its exit
is what tells.

A close is judged only once the receiver has read what came before it. ZeroMQ's I/O
thread reads a connection ahead of the receiver: a simulation that said BYE and
exited normally has its close seen while its BYE (and the data before it) may still
wait in the socket's queue, for as long as the receiver is busy or waits for room in
the buffer. Judged at once, as it was, that close counted as lost and was warned of.
The messages a connection delivered are in the socket's queue before its
``DISCONNECTED`` event is emitted (libzmq flushes what it decoded before reading
further; the queue keeps them after the close, up to its end marker). So a close
awaits (`pending`, logged at DEBUG) until the receiver finds its socket empty
(`settle`, from its idle path: no cost per message): by then every message that
connection sent has been read, and a BYE read in between (matched by simulation and
rank, `bye`) settles it as the client's own. Under a stream that never leaves the
socket empty, a loss is counted late, at the first empty poll (the receiver keeps
reading after the end of the stream, until `stop`), or at `close`.

Each simulation is logged once (the first of its connections lost), at WARNING, unless
its close was seen once the receiver had ended or was stopping, or once the study had
begun to stop its simulations (`study_stops`, called by `Study.stop` before its launcher
kills them, while the receiver still runs: a user's preempted run had a WARNING per
simulation it killed itself). Those closes are the study's own doing: their simulations
are recorded unfinished by the launcher and a resume runs them again, so nothing is lost
in the sense of the warning; they are counted as before and summarised in one INFO line
at `close` (the project's rule for many like events). Whether a close is the study's is
decided when its event is read, not when it is judged: a solver that died on its own
before the stop, judged after it, is still warned of.

Every rank hears the kills (each client rank of a simulation connects to every training
rank's receiver), but only rank 0 runs the launcher, and a rank k's own `Study.stop` may
come after rank 0's kills: a rank's hooks run later (at a preemption, after the last
collective), or rank 0 stopped alone (its study failed) while rank k still trains. So
rank 0 also says it in the rendezvous directory (`announce_study_stops`: a file
``study_stops`` holding the run id, written before the kills), and every rank's watch
reads that file when it reads a close whose BYE it has not read (`study_stops_announced`:
a ``stat`` and a read per such close, rare; none once it is seen, nothing on the data
path). A file, not a collective before the kills (a failed or a late rank would hold
the stop, or hang it) nor a judgment deferred on the other ranks (no delay is long
enough for a late rank, and a solver that died on its own in that delay would pass as
the study's): a kill's close comes after the file was written, so the rank that reads
it finds it, with no wait on any rank. On a shared file system whose clients cache a
missing name (NFS), a rank on another node may not see it at once: that close is then
warned of, as before. The run id in the file keeps an earlier run's file (a resume into
the same output directory) from silencing this run's warnings.

Thread-safety: `hello`, `bye` and `settle` are called by the receiver's ingester
(whoever holds its lock), the events read by the watch's own thread; the map of
connections and the closes awaiting judgment are shared under a lock of their own
(taken per HELLO, BYE and close: rare). A descriptor reused by a new connection before
the old one's event is read is named after the new one's HELLO (the event of the old
one is matched by number): rare, and only the log line's name is then wrong, never a
count of data.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import zmq
from zmq.utils.monitor import parse_monitor_message

from melissa_trainer.wire import Bye, Hello

__all__ = [
    "STUDY_STOPS_FILE",
    "ConnectionWatch",
    "announce_study_stops",
    "clear_study_stops",
    "study_stops_announced",
]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

_POLL_MS = 1000  # a bound on the watch's wait (`close` wakes it at once: `_wake_r`)
#: rank 0's word to every rank that its study kills the simulations (module docstring)
STUDY_STOPS_FILE = "study_stops"


def announce_study_stops(directory: str | os.PathLike[str] | None, run_id: str | None) -> None:
    """Write ``{directory}/study_stops`` holding `run_id` (``"-"`` when None): every
    receiver of that run (`study_stops_announced`) takes the closes it reads from now on
    as the study's. Written aside then renamed (never read half-written). Never raises:
    an OSError is logged (the other ranks then warn of the kills, as before the file).
    Nothing without a `directory`."""
    if directory is None:
        return
    path, tmp = Path(directory), None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{STUDY_STOPS_FILE}.", dir=path)
        with os.fdopen(fd, "w") as f:
            f.write(run_id or "-")
        os.replace(tmp, path / STUDY_STOPS_FILE)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)
        logger.info(
            "could not tell the other ranks that the study stops (%s): they may "
            "warn of the simulations it kills as of data lost",
            exc,
        )


def clear_study_stops(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's ``study_stops`` (rank 0, before it launches anything)."""
    try:
        (Path(directory) / STUDY_STOPS_FILE).unlink(missing_ok=True)
    except OSError as exc:  # (its run id still tells it apart)
        logger.debug("removing %s: %s", STUDY_STOPS_FILE, exc)


def study_stops_announced(directory: str | os.PathLike[str] | None, run_id: str | None) -> bool:
    """Whether rank 0 said that the study of run `run_id` kills its simulations
    (`announce_study_stops`); False without a `directory`, and when the file is missing,
    unreadable or another run's."""
    if directory is None:
        return False
    try:
        return (Path(directory) / STUDY_STOPS_FILE).read_text() == (run_id or "-")
    except (OSError, UnicodeDecodeError):
        return False


class ConnectionWatch:
    """Counts and logs the connections of `socket` that close between a client rank's
    HELLO and its BYE (module docstring). `count` is called with each one (from the
    ingester, in `settle`); `frame_bound` is the socket's ``ZMQ_MAXMSGSIZE``, for the
    log. `quiet` says the receiver ends or stops, `announced` that rank 0 said its study
    stops (`study_stops_announced`): a close read while either is true is the study's."""

    def __init__(
        self,
        socket: zmq.Socket,
        frame_bound: int,
        count: Callable[[], None],
        quiet: Callable[[], bool] = lambda: False,
        announced: Callable[[], bool] = lambda: False,
    ) -> None:
        self._socket, self._frame_bound = socket, frame_bound
        self._count, self._quiet, self._announced = count, quiet, announced
        self._logged: set[int] = set()  # simulations already named (once each)
        self._study_stops = False  # `study_stops`: closes from now on are the study's
        self._stopped: set[int] = set()  # simulations whose close was the study's (summary)
        self._lock = threading.Lock()  # _owners and _closed: HELLO, BYE, close (rare)
        self._owners: dict[int, tuple[int, int]] = {}  # fd -> (simulation, client rank)
        # (simulation, client rank) of the connections seen closed whose BYE was not read
        # yet, in the order of their events: judged by `settle`; with each, whether it
        # was seen as the study stopped (`_at_stop`: summarised, not warned of)
        self._closed: list[tuple[int, int]] = []
        self._at_stop: list[bool] = []
        self._stop = threading.Event()
        self._monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        # `close` writes a byte here to wake the thread's poll at once: the wait would
        # otherwise hold `close` (and the receiver's `stop`) up to `_POLL_MS`
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(
            target=self._run, name="melissa-receiver-connections", daemon=True
        )
        self._thread.start()

    @property
    def pending(self) -> int:
        """Closes seen whose BYE was not read yet, awaiting `settle` (any thread)."""
        return len(self._closed)

    def study_stops(self) -> None:
        """The study is about to stop its simulations (any thread; `Study.stop`, before
        its launcher kills them): the connections seen closing without a BYE from now on
        are counted, and summarised in one line at `close` instead of a warning each."""
        self._study_stops = True

    def hello(self, frame: zmq.Frame, msg: Hello) -> None:
        """A HELLO came on `frame`'s connection (the ingester)."""
        with self._lock:
            self._owners[frame.get(zmq.SRCFD)] = (msg.simulation_id, msg.client_rank)

    def owner_of(self, fd: int) -> tuple[int, int] | None:
        """(simulation, client rank) of open connection `fd`, its HELLO read and no BYE."""
        with self._lock:
            return self._owners.get(fd)

    def bye(self, frame: zmq.Frame, msg: Bye) -> None:
        """A BYE came on `frame`'s connection: its close is the client's own (the
        ingester). Matched by simulation and rank, not by descriptor alone: the BYE of
        a connection already seen closed may come after its descriptor was reused."""
        owner, fd = (msg.simulation_id, msg.client_rank), frame.get(zmq.SRCFD)
        with self._lock:
            if self._owners.get(fd) == owner:
                del self._owners[fd]
            elif owner in self._closed:
                i = self._closed.index(owner)  # (the first: the oldest such close)
                del self._closed[i], self._at_stop[i]

    def settle(self, empty: Callable[[], bool]) -> None:
        """Judge the closes seen so far, if `empty()` (called after they are taken)
        says the socket holds no message: every message their connections sent was
        then read, BYE included; those without one are counted and logged. Called by
        the ingester after an empty poll; nothing to do (a length read) without a
        close pending. Blocks for a `zmq_poll` of 0 ms at most."""
        n = len(self._closed)
        if not n or not empty():  # (the closes taken before the socket is found empty)
            return
        with self._lock:
            lost, self._closed[:n] = self._closed[:n], []
            at_stop, self._at_stop[:n] = self._at_stop[:n], []
        for (sid, rank), stopped in zip(lost, at_stop, strict=True):
            if stopped:
                self._stopped.add(sid)
                self._count()
            else:
                self._judged_lost(sid, rank)

    def close(self, empty: Callable[[], bool] | None = None) -> None:
        """Stop the thread and the monitor (before the socket is closed), then settle
        what is pending if `empty` is given (`settle`; the caller must own the socket
        then: the receiver's thread has ended), and log the summary of the closes that
        were the study's (`study_stops`), if any. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        try:
            self._socket.disable_monitor()
        except zmq.ZMQError as exc:  # the socket is being closed anyway
            logger.debug("disabling the receiver's monitor: %s", exc)
        self._monitor.close(linger=0)
        if empty is not None:
            self.settle(empty)
        if self._stopped:
            self._summary()

    def _run(self) -> None:
        monitor = self._monitor
        poller = zmq.Poller()  # (made once: this thread's only)
        poller.register(monitor, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        while not self._stop.is_set():
            ready = dict(poller.poll(_POLL_MS))
            if not ready.get(monitor):
                continue  # the wait's bound, or `close` woke it (the loop then ends)
            event = parse_monitor_message(monitor.recv_multipart())  # (ZeroMQ's, not ours)
            fd = int(event["value"])  # a DISCONNECTED event's value is the descriptor
            if event["event"] != zmq.EVENT_DISCONNECTED:
                continue
            # the study's own stop (this rank's `study_stops`, or rank 0's word read for a
            # close of a named connection), or the receiver's: judged when the event is
            # read (a close seen before, judged after, is the simulation's own: warned of)
            with self._lock:
                named = fd in self._owners
            if named and not self._study_stops and self._announced():
                self._study_stops = True  # (latched: the file is not read again)
            at_stop = self._study_stops or self._quiet()
            with self._lock:  # (a BYE read meanwhile took the connection: no close then)
                owner = self._owners.pop(fd, None)
                if owner is not None:
                    self._closed.append(owner)
                    self._at_stop.append(at_stop)
            if owner is not None:
                logger.debug(
                    "simulation %d client rank %d: connection closed; lost unless its BYE "
                    "is still queued (judged once the socket is found empty)",
                    *owner,
                )

    def _summary(self) -> None:
        ids = sorted(self._stopped)
        one = len(ids) == 1
        shown = ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")
        if self._study_stops:  # (the launcher's kills: rank 0's, heard on every rank)
            why = (
                "killed as the study stopped (the trainer's end, a preemption or an "
                "error) closed without a BYE: no data lost, the launcher records "
                f"{'it' if one else 'them'} unfinished and a run resumed from a checkpoint "
                f"runs {'it' if one else 'them'} again (steps already received are not "
                "taken twice)"
            )
        else:  # (external mode: no launcher)
            why = (
                "closed without a BYE once this receiver had ended or was stopping: "
                "counted (connections_lost), not warned of"
            )
        logger.info("%d simulation%s (%s) %s", len(ids), "" if one else "s", shown, why)

    def _judged_lost(self, sid: int, rank: int) -> None:
        if sid in self._logged:
            self._count()
            return
        self._logged.add(sid)
        logger.warning(
            "simulation %d client rank %d: its connection closed before its BYE: the "
            "process ended without it (killed, crashed, or exited without closing its "
            "client), its client was left by an exception (which sends no BYE: a worker's "
            "failed simulation, the worker living on), or it sent a message over %d bytes (the "
            "receiver's max_message_bytes + header allowance), which ZeroMQ drops with "
            "the connection and what was queued behind it; that data is lost until the "
            "simulation runs again (a launcher restarts it; a solver you started yourself: "
            "run it again with the same simulation id)",
            sid,
            rank,
            self._frame_bound,
        )
        self._count()  # after the log: a reader of the count finds the line written
