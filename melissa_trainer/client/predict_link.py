"""The connection of a `Predictor` (`melissa_trainer.client.predict`) to the training
rank that serves its simulation: the DEALER socket to it, to the endpoint looked up
where that rank serves (`predict_endpoint`: an endpoint given, the environment, the
rendezvous directory's serve files; opened by `predict_socket`), the socket's monitor
(a handshake the server refused, a trainer gone), and the backoff after a trainer was
found gone. The module docstring of `predict` states the rules; the C client's
serve.c, handshake.c and predict_watch.c follow the same ones.

A `Predictor` asks (encodes a request, sends it, waits for its answer); this module
finds the server and says when it is not there. Imports the standard library, numpy,
pyzmq and the shared `stream` modules only.
"""

from __future__ import annotations

import time

import zmq

from melissa_trainer.client.config import ENV_RENDEZVOUS
from melissa_trainer.client.predict_endpoint import (
    ENV_SERVE_ENDPOINTS,
    ENV_SERVE_KEY,
    EndpointLookup,
)
from melissa_trainer.client.predict_errors import (
    SILENT,
    TOO_SHORT,
    PredictTimeout,
    handshake_refused,
    no_answer,
    not_serving,
)
from melissa_trainer.client.predict_events import DRAIN, NO_ANSWER, TIMED_OUT, ServeEvents
from melissa_trainer.client.predict_socket import GONE, check_host, open_socket
from melissa_trainer.client.sockets import connect_timeout_ms
from melissa_trainer.wire import FieldSpec

# (the variables re-exported: their import path before `predict_endpoint`)
__all__ = ["PredictLink", "poll_ms"]

#: After a trainer was found gone (a connection refused or lost, its serve file
#: removed), requests fail at once without dialling for a backoff that doubles from the
#: first to the second (seconds): no socket per request while the trainer is away (a
#: solver asking in a loop made thousands a second: "Too many open files").
_BACKOFF = (0.05, 1.0)
#: Seconds a connection closed at the handshake may wait for ZeroMQ to dial again
#: (CONNECT_RETRIED, posted by its I/O thread right after the DISCONNECTED): none comes
#: after a protocol error, a socket of another kind (a receiver's PULL), whose session
#: ZeroMQ ends for good; one comes after a trainer that died mid-handshake. (Both events
#: are posted in one turn of the I/O thread: the bound is for that thread descheduled
#: on a loaded node, where a wrong guess would fail a solver whose trainer is alive.)
_NO_REDIAL = 0.5


def poll_ms(left: float) -> int:
    """Milliseconds for one ZeroMQ poll of a wait of `left` seconds: at least 1, at
    most an hour (a poll's timeout is a C int: 24.8 days overflow it; the callers poll
    again until their deadline)."""
    return max(1, int(min(left * 1000, 3_600_000)))  # (capped first: int(inf) raises)


class PredictLink:
    """The socket of a `Predictor` to its serving rank, opened at the first request and
    again after a failure (`reset`), and what is known of the trainer there.

    Args: `lookup`, where the serving rank is (`predict_endpoint.EndpointLookup`, of
        `Predictor`'s arguments, checked there), looked up again at each `connect`;
        `context`, the ZeroMQ context of the sockets (the caller's to end).

    Attributes:
        socket: the DEALER to the serving rank, None until `connect` and after `reset`.
        monitor: its monitor socket (handshake failures, connections refused or lost).
        connected: the endpoint and CURVE key of `socket`.
        lookup: where the serving rank is (`EndpointLookup`), looked up at `connect`.
    """

    def __init__(self, lookup: EndpointLookup, context: zmq.Context) -> None:
        self.simulation_id = lookup.simulation_id
        #: where the serving rank is (looked up at each `connect`)
        self.lookup = lookup
        self._context = context
        self.socket: zmq.Socket | None = None
        self.monitor: zmq.Socket | None = None  # the socket's handshake failures
        self._events: ServeEvents | None = None  # its events read (handshakes timed out)
        self.connected: tuple[str, str | None] = ("", None)  # its endpoint and key
        self._key_given = False  # that key was given (argument, environment), not read
        # a trainer found gone: why, when to dial again, and the backoff (`gone`)
        self._gone_why, self._retry_at, self._backoff = "", 0.0, 0.0
        #: whether the endpoint connected to was given (an argument, the environment)
        #: rather than read from a serve file
        self._endpoint_given = False
        self._resolved: set[str] = set()  # host names found to resolve (`_unresolved`)
        # The endpoint whose peer went silent at an earlier request (accepted TCP, never
        # answered: a trainer stopped by SIGSTOP), "" if none or it answered since: kept
        # across `reset`, which closes the connection whose age said it (`went_silent`).
        self._silent_at = ""
        #: the inputs the trainer connected to described (`predict_describe`), () when
        #: it does not describe (an older trainer), None when not asked on this
        #: connection: forgotten when it drops (a trainer restarted there may serve
        #: other inputs) and at `reset`
        self.described: tuple[FieldSpec, ...] | None = None

    @property
    def inputs(self) -> list[FieldSpec] | None:
        """The inputs the serving rank takes, when read from its serve file or
        described by the trainer (an endpoint given); None: not known."""
        if self.lookup.inputs is None and self.described:
            return list(self.described)
        return self.lookup.inputs

    def check_backoff(self, now: float) -> None:
        """Raise `PredictTimeout` at once while the backoff after a trainer found gone
        lasts (no socket is opened until it ends). The backoff ends early once the
        rendezvous directory changed since the endpoint was last looked up there (one
        ``stat`` per request: a trainer resumed, or another rank, published its serve
        file): the request then looks again, so a resumed trainer is asked at the first
        request after it serves, not up to a backoff later. Each change ends at most one
        backoff (the lookup records the directory as it read it), so a trainer away
        costs no more lookups than it makes changes there."""
        if self.socket is None and now < self._retry_at:
            if self.lookup.changed():
                self._retry_at = 0.0
                return
            raise PredictTimeout(
                f"{self._gone_why} (at an earlier request; the next attempt in "
                f"{self._retry_at - now:.2f} s at most)"
            )

    def join(self, run_id: str | None, context: zmq.Context) -> None:
        """Ask as `run_id`, over sockets of `context`, from the next request on (the
        client followed a restarted trainer, `Client.predict`): the socket is closed
        (`reset`, which must come before the old context's end), the backoff ends (the
        next request looks the new run's endpoint up at once), and that a trainer served
        here is kept (a request while the new run publishes no serve file yet fails at
        once, as after a trainer that stopped, instead of waiting its timeout)."""
        self.reset()
        self.lookup.run_id, self._context = run_id, context
        self.lookup.run_source = "run_id"  # (given by the caller now)
        self.lookup.inputs = None  # (the new run's are its serve file's, once published)
        self._retry_at, self._backoff, self._silent_at = 0.0, 0.0, ""

    def answered(self) -> None:
        """A trainer answered there: the next one found gone starts the backoff anew,
        and it is silent no more (`went_silent`)."""
        self._backoff, self._silent_at = 0.0, ""

    def went_silent(self) -> None:
        """The peer connected to holds the connection and did not answer in time (a
        request's `UNANSWERED` timeout): a later connection to it that is up with no
        handshake at the timeout is said silent (`SILENT`), whatever its age. Without
        this, after a short timeout's first failure (which closes the socket), every
        request to a stopped trainer said "no connection ... gone or restarting"."""
        self._silent_at = self.connected[0]

    def connect(self, deadline: float, timeout: float) -> zmq.Socket:
        """The socket to the serving rank: the open one, else a new one to the endpoint
        looked up (waiting for a serve file up to `deadline`), with its monitor. Its TCP
        connect is bounded by the data sockets' rule (`sockets.connect_timeout_ms`) of
        `timeout`, the request's (a `Predictor` has no tuning; C: predict.c the same): at
        least 2 s, so a request never outlasts it by much, and a host that never answers
        is not dialled for the kernel's ~2 minutes after the request gave up on it.

        Raises:
            PredictTimeout: no endpoint published in time, or the trainer that served
                there stopped (its serve file removed).
            ValueError: no endpoint configured, a key that is not a Z85 key, an endpoint
                ZeroMQ cannot connect to.
        """
        if self.socket is not None:
            return self.socket
        endpoint, key, given = self.lookup.find(deadline, timeout, self.gone)
        connect_ms = connect_timeout_ms(timeout)
        sock, monitor = open_socket(
            self._context, endpoint, key, connect_ms, self.lookup.serve_file
        )
        self.socket, self.monitor, self.connected = sock, monitor, (endpoint, key)
        self._events = ServeEvents(sock, monitor)
        self._key_given = key is not None and given
        self._endpoint_given = given
        return sock

    def wait_connected(self, sock: zmq.Socket, deadline: float, timeout: float) -> None:
        """Block until `sock` has a connection to send on (``ZMQ_IMMEDIATE``), up to
        `deadline`; a handshake the server refused, a socket that is not a serving one
        and a host name that does not resolve raise ValueError at once (the last two
        `PredictTimeout` when the endpoint was read from a serve file: a stale one). A
        peer that accepts TCP and never answers (`predict_events`: a trainer stopped,
        another program) is waited for, and its `PredictTimeout` says so (`SILENT`); so
        is a host that never answers the TCP connect (`no_answer`: at the deadline, or
        at once when the connect bound abandoned the attempt first), which a refusal
        ("nothing listens there", at once) is not."""
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLOUT)
        if self.monitor is not None:
            poller.register(self.monitor, zmq.POLLIN)
        undetailed = 0
        refused = False  # a connection attempt failed (and no handshake was refused)
        retried = 0  # reconnections scheduled since the last connection made (2: one failed)
        dropped = 0.0  # when a connection closed before it served, not dialled again yet
        timed_out = self._events.timed_out if self._events is not None else 0
        while True:
            now = time.monotonic()
            left = deadline - now
            wait = min(left, dropped + _NO_REDIAL - now) if dropped else left
            if self._events is not None and self._events.connecting:
                wait = min(wait, DRAIN)  # (the attempt's end dated: `predict_events`)
            ready = dict(poller.poll(poll_ms(wait))) if wait > 0 else {}
            if sock in ready:
                return
            for event in self._events.read() if self._events is not None else ():
                if event in (TIMED_OUT, zmq.EVENT_CONNECTED):  # (the peer is there)
                    retried = 0 if event == zmq.EVENT_CONNECTED else retried
                    continue
                if event == NO_ANSWER:  # (the connect bound ended an attempt: not refused)
                    bound = self._events.connect_bound if self._events is not None else 0.0
                    raise self._no_answer(bound)
                if event == zmq.EVENT_DISCONNECTED:
                    dropped, self.described = time.monotonic(), None
                    continue
                if event & GONE:  # (ZeroMQ dials again: not a protocol error)
                    refused, dropped = True, 0.0
                    retried += event == zmq.EVENT_CONNECT_RETRIED
                    continue
                # A mechanism mismatch (CURVE on one side only) is certain at once. A
                # failure without detail is also a connection lost mid-handshake (a
                # trainer stopping): a key given here, refused twice in a row, is not the
                # server's; one read from the rendezvous may be stale (a restarted
                # trainer's new key), which the lookup after a timeout reads again.
                # Without CURVE, twice is a socket of another kind that closed the
                # connection before this one saw why (the race of the next rule).
                undetailed += event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                if event != zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL or (
                    undetailed >= 2 and self._key_given
                ):
                    raise self._refused_handshake()
                if undetailed >= 2 and self.connected[1] is None:  # (either: a race)
                    raise self._not_serving(curve_too=True)
            if dropped and time.monotonic() - dropped >= _NO_REDIAL:
                # Closed at the handshake and never dialled again: ZeroMQ's protocol
                # error, a socket of another kind there (a receiver's PULL: its
                # endpoint is the `endpoint` of rank_{r}.json, beside serve_{r}.json).
                raise self._not_serving()
            if refused and (not undetailed or retried >= 2):
                self._check_host()  # (a name that does not resolve is refused too)
                # Nothing listens there (a dead trainer's port refuses at once): fall
                # back now, not at the timeout; ZeroMQ would retry the connection every
                # 0.1 s in vain until then. (After a handshake failure, the retry is the
                # handshake's: the rule above decides; unless a reconnection failed
                # without connecting: a trainer killed as its kernel accepted this
                # connection, its port closed since: tests/client/test_predict_dying_trainer.py)
                raise self.gone(
                    f"the trainer's serving endpoint {self.connected[0]} refused the "
                    "connection: nothing listens there (the trainer is gone or restarting)"
                )
            if left <= 0:
                endpoint = self.connected[0]
                was = bool(endpoint) and endpoint == self._silent_at
                silent = self._events is not None and self._events.silent(timed_out, was)
                waited = self._events.unanswered() if self._events is not None else None
                if waited is not None and endpoint.startswith("tcp://"):
                    raise self._no_answer(waited)  # (a connect in progress since dialled)
                self.reset()
                if silent:
                    self._silent_at = endpoint  # (still silent: the next one says so too)
                    raise PredictTimeout(
                        f"the trainer's serving endpoint {endpoint} accepted a TCP connection "
                        f"but no ZeroMQ handshake completed within {timeout} s: {SILENT}"
                    )
                # (a live trainer too, under a timeout shorter than a connection takes,
                # 0.1 ms here, 1 ms locally, at every request: user trial 39)
                raise PredictTimeout(
                    f"no connection to the trainer's serving endpoint within {timeout} s "
                    f"(the trainer is gone or restarting; {TOO_SHORT})"
                )

    def lost(self, last: bool = False) -> bool:
        """Whether the monitor's waiting events say the connection dropped (what the
        trainer described is then forgotten: it may be another trainer there now).
        `last` (after `wait_connected`): only a DISCONNECTED after the last CONNECTED
        counts, the connection found gone; the earlier ones were of earlier
        connections (a trainer restarted there). ZeroMQ posts it before it closes the
        connection's pipe, which takes a message meanwhile, never answered."""
        events = self._events.read() if self._events is not None else []
        links = [e for e in events if e in (zmq.EVENT_CONNECTED, zmq.EVENT_DISCONNECTED)]
        if zmq.EVENT_DISCONNECTED not in links:
            return False
        self.described = None
        return not last or links[-1] == zmq.EVENT_DISCONNECTED

    def gone(self, why: str) -> PredictTimeout:
        """The trainer is gone (`why`): close the socket, and fail the requests of the
        next backoff at once (`_BACKOFF`); the one after it looks the endpoint up again."""
        self.reset()
        first, most = _BACKOFF
        self._backoff = min(most, 2 * self._backoff) if self._backoff else first
        self._gone_why, self._retry_at = why, time.monotonic() + self._backoff
        return PredictTimeout(f"{why}; the next request looks the endpoint up again")

    def reset(self) -> None:
        """Close the socket and its monitor (after a failure, at `Predictor.close`):
        the next request connects again, looking the endpoint up again."""
        self.described = None
        if self.socket is not None:
            if self.monitor is not None:
                self.socket.disable_monitor()
                self.monitor.close(linger=0)
                self.monitor, self._events = None, None
            self.socket.close(linger=0)
            self.socket = None

    def _no_answer(self, seconds: float) -> PredictTimeout:
        """The error of a host that did not answer the connect for `seconds`
        (`predict_errors.no_answer`); the socket is closed, no backoff follows (the
        request waited that long: no dial per request in a loop)."""
        endpoint = self.connected[0]
        self.reset()
        return no_answer(endpoint, seconds)

    def _not_serving(self, curve_too: bool = False) -> Exception:
        """The error of an endpoint that answers but is not a serving socket: a
        ValueError when given; a trainer gone (`gone`) when read from a serve file (a
        stale one: its port taken by another socket since). `curve_too`: handshakes
        failed without detail, no key known: or a CURVE-only serving socket (said too)."""
        endpoint, rank = self.connected[0], self.lookup.rank
        self.reset()
        if not self._endpoint_given:
            return self.gone(
                f"the serving endpoint {endpoint} of serve_{rank}.json answers but is not a "
                "serving socket: it closed the connection at the handshake (a stale serve "
                "file, its port another socket's now?)"
            )
        key_env = ENV_SERVE_KEY if curve_too else None
        return not_serving(endpoint, rank, ENV_RENDEZVOUS, ENV_SERVE_ENDPOINTS, key_env)

    def _check_host(self) -> None:
        """Raise ValueError when the host name of the endpoint connected to does not
        resolve (`predict_socket.check_host`), the socket closed first."""
        try:
            check_host(self.connected[0], self._resolved, self._endpoint_given)
        except ValueError:
            self.reset()
            raise

    def _refused_handshake(self) -> ValueError:
        """The error of the handshake refused (`handshake_refused`: with ZeroMQ's
        detail of a mechanism mismatch, a key given to a server without CURVE)."""
        endpoint, key = self.connected
        plain = self._events is not None and self._events.mismatched
        self.reset()
        given, rank = self._key_given, self.lookup.rank
        return handshake_refused(endpoint, key, ENV_RENDEZVOUS, ENV_SERVE_KEY, given, rank, plain)
