"""Connection attempts the receiver's socket refuses in their ZeroMQ handshake: counted by
cause, the first of each cause warned of, naming the likely client and its fix, the others
at DEBUG and summed up in one line at the end (the project's rule for many like events).

ZeroMQ refuses these peers itself, in its I/O thread: nothing they send arrives and, but for
a socket monitor, nothing says so. The receiver's `connections.ConnectionWatch` reads its
socket's monitor and hands the handshake events to `HandshakeWatch` (`event`,
`disconnected`). libzmq 4.3.5 (measured, `tests/stream/test_receiver_handshake_words.py`)
gives each refused attempt an ``ACCEPTED``, at most one ``HANDSHAKE_FAILED_*`` event and
then its ``DISCONNECTED``, emitted back to back by the I/O thread (one per receiver's
context): the failure event names no descriptor, so it is that of the next close. Its
detail tells the cause:

- ``HANDSHAKE_FAILED_PROTOCOL`` with ``ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH``: on a
  receiver with CURVE (``curve_secret_key``), a client without a key (plain text); on one
  without, a client with a CURVE key.
- ``HANDSHAKE_FAILED_AUTH``, or ``HANDSHAKE_FAILED_PROTOCOL`` with
  ``ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC`` (the receiver cannot open the client's CURVE
  HELLO: no ZAP handler here, so a wrong key is this one): a client with another key.
- ``HANDSHAKE_FAILED_NO_DETAIL``, or no event at all: the peer closed first. A client
  without a key that saw the mismatch before the receiver did (racing: about one attempt
  in two, measured; a wrong key was always the receiver's to see, with its detail, but
  the words allow either), a client with a key for a receiver without CURVE (the same
  race), a socket that cannot send to a PULL (a REQ or DEALER: a prediction request
  given the stream endpoint), or no ZeroMQ peer at all (a port probe). Other protocol
  errors are counted with these.

So on a receiver with CURVE the words put the key first. What is counted is connection
attempts, not clients: a refused client dials again at each reconnect interval (100 ms by
default) until it stops, and ZeroMQ names no peer in these events (a trial read "2
connections closed" for 4 clients, the attempts refused with a detail not counted at all:
only those without one were).

Once the study stops (its launcher about to kill the solvers) or the receiver ends, an
attempt closed without detail is a solver killed as it started: counted apart (`at_stop`)
and said in one INFO line at the end, not warned of.

``HANDSHAKE_SUCCEEDED`` names no descriptor either: taken as the oldest handshake's (a
HELLO proves its own: concurrent handshakes may leave an attempt without a failure event
uncounted, never count a PUSH that said HELLO).

Thread-safety: called by the receiver's ingester only (as `ConnectionWatch._drain`).
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable

import zmq

from melissa_trainer.stream.receiver_address import is_loopback

__all__ = ["EVENTS", "HandshakeWatch", "log_bound"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
#: the monitor events this watch reads (besides ``DISCONNECTED``, `disconnected`'s)
EVENTS = _FAILED | zmq.EVENT_ACCEPTED | zmq.EVENT_HANDSHAKE_SUCCEEDED


def log_bound(
    log: logging.Logger, what: str, endpoint: str, public_key: str | None, variable: str
) -> None:
    """Say at INFO where `what` (a receiver, a serving socket) is bound: with CURVE,
    naming its public key (the Z85 text, never the secret) for an operator to hand to
    solvers started by hand, in `variable` (MELISSA_TRAINER_KEY, _SERVE_KEY; the
    rendezvous files carry it to the others); without CURVE beyond loopback, that any
    peer may send (on loopback: nothing, the default)."""
    if public_key is not None:
        log.info(
            "%s bound to %s with CURVE; its public key: %s (%s for a solver given the "
            "endpoint; the rendezvous files carry it)",
            what,
            endpoint,
            public_key,
            variable,
        )
    elif not is_loopback(endpoint):
        log.info("%s bound to %s without CURVE: any peer may send", what, endpoint)


# the causes, as counted (`counts`) and named in the summary
NO_KEY, OTHER_KEY, A_KEY, UNKNOWN = (
    "from a client without a CURVE key",
    "from a client with another CURVE key",
    "from a client with a CURVE key",
    "without detail",
)
_GIVE_KEY = (
    "give the client this receiver's curve_public_key (Receiver.curve_public_key, written "
    "to its rendezvous file rank_N.json, which a client reading that directory uses; with "
    "MELISSA_TRAINER_ENDPOINTS, set MELISSA_TRAINER_KEY to it)"
)
_WRONG_TYPE = (
    "a socket that cannot send to a PULL (a REQ or DEALER: mt_predict or Predictor given "
    "the stream endpoint of rank_N.json: give it serve_N.json's)"
)
# A peer that closes in its handshake is also a client whose process ended there (a
# solver that crashed or was killed within milliseconds of its start: its connections
# were still in their CURVE handshake): seen from here, the same events. A user trial
# was sent to check a key that was right.
_ENDED = (
    "a client process that ended in its handshake (a solver that crashed or was killed "
    "right after it started: its own log or the launcher's says why; nothing to fix here)"
)
#: what the first refusal of each cause says: (receiver with CURVE?, cause) -> why, fix
_WORDS = {
    (True, NO_KEY): "a client without a CURVE key (it connects in plain text; this receiver "
    "takes CURVE connections only): " + _GIVE_KEY,
    (True, OTHER_KEY): "a client with another CURVE key than this receiver's (a stale "
    "MELISSA_TRAINER_KEY, another trainer's key, an earlier run's rendezvous file): " + _GIVE_KEY,
    (True, UNKNOWN): "this receiver takes CURVE connections only: most likely a client "
    "with no CURVE key or another key (it closed first: ZeroMQ gives no detail): "
    + _GIVE_KEY
    + "; else "
    + _WRONG_TYPE
    + ", "
    + _ENDED
    + ", else not ZeroMQ (a port probe)",
    (False, A_KEY): "a client with a CURVE key (this receiver takes plain connections): "
    "unset the client's MELISSA_TRAINER_KEY, or give this trainer's ReceiverConfig the "
    "curve_secret_key whose public key the client has",
    (False, UNKNOWN): "likely "
    + _WRONG_TYPE
    + ", or a client with a CURVE key (this receiver takes plain connections) that closed "
    "first (unset its MELISSA_TRAINER_KEY), " + _ENDED + ", else not ZeroMQ (a port probe)",
}


class HandshakeWatch:
    """Counts and logs the connection attempts of `socket` refused in their handshake
    (module docstring), worded for its mechanism (a CURVE server or not, read from the
    socket: set before this watch is made); `label` ends each line (the receiver's rank
    under several)."""

    def __init__(self, socket: zmq.Socket, label: str = "") -> None:
        self._curve = socket.getsockopt(zmq.MECHANISM) == zmq.CURVE
        self._label = label
        self._shaking: dict[int, None] = {}  # fds accepted, in their handshake (in order)
        self._failed: deque[str] = deque()  # causes read, their DISCONNECTED not yet
        #: refused attempts so far, by cause (`NO_KEY`, `OTHER_KEY`, `A_KEY`, `UNKNOWN`)
        self.counts: Counter[str] = Counter()
        #: connections closed in their handshake, without detail, as the study stopped
        #: (its solvers killed as they started: not refusals, not in `counts`)
        self.at_stop = 0

    @property
    def refused(self) -> int:
        """Connection attempts refused in their handshake so far (not clients: one
        client dials again at each reconnect interval)."""
        return sum(self.counts.values())

    def event(self, kind: int, value: int) -> None:
        """A monitor event of `EVENTS`: `kind`, and its `value` (a descriptor, a ZMTP
        protocol error code, a ZAP status or an errno)."""
        if kind == zmq.EVENT_ACCEPTED:
            self._shaking[value] = None
        elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED and self._shaking:
            del self._shaking[next(iter(self._shaking))]  # (the oldest: no descriptor)
        elif kind & _FAILED:  # (its DISCONNECTED comes next)
            self._failed.append(self._cause(kind, value))

    def hello(self, fd: int) -> None:
        """A message came on connection `fd`: its handshake succeeded."""
        self._shaking.pop(fd, None)

    def disconnected(
        self, fd: int, endpoint: bytes, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """Connection `fd` to `endpoint` closed: counted and logged if it was refused in
        its handshake (a failure event before it, or accepted with no handshake since).
        One without detail while `stopping()` (the study kills its simulations, the
        receiver ends: asked only then) is a solver killed as it started: counted in
        `at_stop`, said at DEBUG and summed up at `close`, not warned of."""
        shaking = self._shaking.pop(fd, 0) is None
        if self._failed:
            cause = self._failed.popleft()
        elif shaking:
            cause = UNKNOWN
        else:
            return
        where = endpoint.decode(errors="replace")
        if cause == UNKNOWN and stopping():
            self.at_stop += 1
            logger.debug("a peer connected to %s closed in its handshake as the study "
                         "stopped%s", where, self._label)  # fmt: skip
            return
        self.counts[cause] += 1
        n = self.counts[cause]
        said = "a peer connected to %s was closed in its ZeroMQ handshake: "
        if n > 1:  # (the cause said in full once: the others counted, summed up at `close`)
            logger.debug(said[:-2] + " (one %s: %d such)%s", where, cause, n, self._label)
            return
        logger.warning(
            said + "%s; nothing it sent arrives (%d such; the next summed up at the end)%s",
            where,
            _WORDS[self._curve, cause],
            n,
            self._label,
        )

    def close(self) -> None:
        """Log the summary line, once the monitor is read to its end (at WARNING, as the
        first ones were: they promised it, and default logging shows WARNING up)."""
        if self.at_stop:
            logger.info(
                "%d connection(s) closed in their ZeroMQ handshake as the study stopped: "
                "solvers killed as they started, not refused%s", self.at_stop, self._label,
            )  # fmt: skip
        total = self.refused
        if total > 1:
            causes = ", ".join(f"{n} {cause}" for cause, n in self.counts.most_common())
            logger.warning(
                "%d connection attempts refused in their ZeroMQ handshake in all (%s; "
                "as warned of above): attempts, not clients, since a refused client dials "
                "again at each reconnect interval and ZeroMQ names no peer%s",
                total,
                causes,
                self._label,
            )

    def _cause(self, kind: int, value: int) -> str:
        if kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            return UNKNOWN
        if kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
                return NO_KEY if self._curve else A_KEY
            if value != zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
                return UNKNOWN  # (another protocol error: a broken or foreign peer)
        return OTHER_KEY if self._curve else UNKNOWN  # (AUTH: only with a ZAP handler)
