"""`PredictServer`: one training rank's serving socket, its I/O thread and its bounded
queue of prediction requests (docs/protocol.md, section 16). Torch-free: the model is
run by whoever drains the queue (`melissa_trainer.hooks.serving.ServingHook`, between
training steps).

The I/O thread owns the ZeroMQ ROUTER socket. For each message it:

* decodes it (`serving_requests.decode_request`: nothing unpickled, every size checked
  before an array is built) and checks its arrays against the declared inputs; a malformed
  request is rejected, counted (``rejected_<reason>``) and logged (the first of each
  reason in full, then one summary line at most every 30 s: `LogSummary`), and
  refused (``bad_request``) when its request id is readable, so that its client
  fails at once instead of at its timeout;
* refuses a request whose inputs hold NaN or Inf unless the receiver's ``nonfinite``
  is ``"accept"`` (`serving_requests.nonfinite_refusal`), counted ``refused_nonfinite``;
* refuses a request naming another run (``wrong_run``), one that comes while nothing
  is served (``not_serving``: before the trainer's first step, after its last), and one
  that finds the queue full (``busy``: back-pressure; the queue never grows past
  `max_queue`);
* answers a DESCRIBE with the declared inputs (``described``; `wire.predict_describe`: a
  client given the endpoint checks its requests before sending them);
* queues the others, stamped with the time and the model version they arrived at.

The queue, its bound, its version stamps, its expiry and the counters are a
`RequestQueue` (`melissa_trainer.stream.serving_queue`; `Pending`, `ServingRefused` and
`DEFAULT_MAX_QUEUE` still import from here). The training thread drains the queue
(`take`), runs the model, and answers (`answer`, `refuse`): replies are handed to the
I/O thread through an inproc socket (ZeroMQ sockets belong to one thread), copied
(`serving_bind` says why; the sockets are `serving_sockets`'). A request older than its
client's timeout is dropped unanswered (counted ``expired``): its client has given up
and fallen back.

A peer that does not read its replies cannot block anyone: the ROUTER drops replies to
a peer whose queue is full or which is gone. A frame over the bound (the declared
inputs' size + `HEADER_ALLOWANCE`) closes its connection in ZeroMQ's I/O thread, which
cannot be counted here: its monitor's DISCONNECTED is a closing client's (libzmq 4.3).

Thread-safety: `start` and `stop` from one thread; `take`, `oldest_version`, `answer`, `refuse`,
`submit`, `telemetry`, `serving` and `version` from any thread. Nothing blocks but
`stop` (up to `STOP_TIMEOUT` seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.stream.liveness import HEADER_ALLOWANCE
from melissa_trainer.stream.log_summary import REJECTED, LogSummary
from melissa_trainer.stream.nonfinite import check_policy
from melissa_trainer.stream.receiver_config import DEFAULT_BIND
from melissa_trainer.stream.serving_bind import forward_answers
from melissa_trainer.stream.serving_queue import (
    DEFAULT_MAX_QUEUE,
    Deliver,
    Pending,
    RequestQueue,
    ServingRefused,
)
from melissa_trainer.stream.serving_rendezvous import remove_serving, write_serving
from melissa_trainer.stream.serving_requests import (
    arrays_problem,
    decode_request,
    nonfinite_refusal,
)
from melissa_trainer.stream.serving_sockets import ServingSockets
from melissa_trainer.wire import PredictRequest, ProtocolError
from melissa_trainer.wire.predict_describe import described, is_describe

__all__ = ["PredictServer"]

logger = logging.getLogger(__name__)

#: seconds `stop` waits for the I/O thread
STOP_TIMEOUT = 10.0
_POLL_MS = 100
_BURST = 256  # requests read in a row before the answers are forwarded again


class PredictServer:
    """One rank's serving socket and queue (module docstring).

    Args:
        inputs: the arrays every request carries (`protocol.field_specs` form).
        rank, world_size: this training rank; it serves simulations ``id % W == rank``.
        bind: the endpoint to bind (default loopback, a random port).
        advertise_host: host published instead of a wildcard bind address.
        curve: the (secret, public) Z85 CURVE server keys (`receiver_address.curve_keys`), or None.
        run_id: requests naming another run are refused (``wrong_run``).
        rendezvous_dir: where ``serve_{rank}.json`` is published (None: nowhere; give
            the clients `endpoint`).
        max_queue: requests waiting at most; more are refused ``busy``.
        nonfinite: the receiver's policy for NaN or Inf (`ReceiverConfig.nonfinite`):
            ``"accept"`` serves such requests, the others refuse them.
    """

    def __init__(
        self,
        inputs: Any,
        *,
        rank: int = 0,
        world_size: int = 1,
        bind: str = DEFAULT_BIND,
        advertise_host: str | None = None,
        curve: tuple[bytes, bytes] | None = None,
        run_id: str | None = None,
        rendezvous_dir: Any = None,
        max_queue: int = DEFAULT_MAX_QUEUE,
        nonfinite: str = "refuse",
    ) -> None:
        self.nonfinite = check_policy(nonfinite)
        if not isinstance(max_queue, int) or isinstance(max_queue, bool) or max_queue < 1:
            raise ValueError(f"max_queue must be an integer >= 1, not {max_queue!r}")
        self.inputs = protocol.field_specs(inputs)
        self.rank, self.world_size = rank, world_size
        self.max_queue = max_queue
        self._bind, self._advertise, self._curve = bind, advertise_host, curve
        self._run_id, self._rendezvous = run_id, rendezvous_dir
        self.max_request_bytes = sum(f.size * f.dtype.itemsize for f in self.inputs)
        self._requests = RequestQueue(max_queue)
        self._summary = LogSummary(logger, f"serving of rank {rank}")
        self._sockets: ServingSockets | None = None  # (`start` opens them)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.endpoint: str | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Bind, start the I/O thread, publish ``serve_{rank}.json``. Returns at once.
        A server starts once: RuntimeError when it runs, or ran and was stopped;
        OSError (its errno, a message naming the endpoint and the fix) when the bind
        fails."""
        if self._sockets is not None:
            raise RuntimeError("PredictServer.start() was called twice")
        if self._stop.is_set():  # (its I/O thread would leave at once: nobody would read)
            raise RuntimeError(
                "PredictServer.start() after stop(): a server starts once; make a new PredictServer"
            )
        socks = ServingSockets.open(
            self._bind, self.rank, self.max_request_bytes + HEADER_ALLOWANCE, self._curve,
            self._advertise,
        )  # fmt: skip
        self._sockets, self.endpoint = socks, socks.endpoint
        if self._rendezvous is not None:
            public = None if self._curve is None else self._curve[1].decode("ascii")
            try:
                write_serving(
                    self._rendezvous, self.rank, self.world_size, self.endpoint, self.inputs,
                    self._run_id, public,
                )  # fmt: skip
            except BaseException:
                self._close()
                raise
        self._thread = threading.Thread(
            target=self._run, name=f"melissa-serving-{self.rank}", daemon=True
        )
        self._thread.start()

    @property
    def curve_public_key(self) -> str | None:
        """The Z85 CURVE public key clients need, or None without CURVE."""
        return None if self._curve is None else self._curve[1].decode("ascii")

    @property
    def version(self) -> int:
        """The model version now (the trainer's global step; set by the drainer:
        `RequestQueue.version` says how it orders with the requests stamped)."""
        return self._requests.version

    @version.setter
    def version(self, value: int) -> None:
        self._requests.version = value

    @property
    def serving(self) -> bool:
        """Whether requests are queued (True) or refused ``not_serving`` (False)."""
        return self._requests.serving

    @serving.setter
    def serving(self, value: bool) -> None:
        self._requests.serving = value

    def stop(self) -> None:
        """Refuse the queued requests (``not_serving``), stop the thread, close the
        sockets, remove the published file. Idempotent."""
        self._requests.serving = False
        for pending in self._requests.drain():
            self.refuse(pending, "not_serving", "the trainer stopped serving")
        if self._rendezvous is not None and self.endpoint is not None:
            remove_serving(self._rendezvous, self.rank, self.endpoint)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT)
            if self._thread.is_alive():
                logger.warning("serving thread of rank %d did not stop", self.rank)
                return
            self._thread = None
        self._summary.flush()
        self._close()

    def _close(self) -> None:
        if self._sockets is not None:  # (None again: a start that failed may be retried)
            self._sockets.close()
        self._sockets = None

    # -- the training thread's side --------------------------------------------------

    def pending(self) -> int:
        """Requests waiting now."""
        return self._requests.pending()

    def oldest_version(self) -> int | None:
        """The model version at which the oldest waiting request arrived (None: none
        waits). Requests are queued in arrival order, so it is the smallest."""
        return self._requests.oldest_version()

    def wait_pending(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a request to wait; True if one does."""
        return self._requests.wait_pending(timeout)

    def take(self, n: int) -> list[Pending]:
        """Up to `n` requests, oldest first; those older than their client's timeout
        are dropped on the way (counted ``expired``, unanswered)."""
        return self._requests.take(n)

    def late_timeouts(self) -> list[int]:
        """The timeouts (ms) of the requests expired or answered late since the last
        call (`RequestQueue.late_timeouts`)."""
        return self._requests.late_timeouts()

    def answer(self, pending: Pending, arrays: dict[str, np.ndarray], version: int) -> None:
        """Send `pending` its prediction, made by model `version`; counted ``answered``,
        and ``answered_late`` too once past its client's timeout (it gave up: unread)."""
        self._requests.count("answered")
        if pending.expired(time.monotonic()):  # (taken in time, its inference too long)
            self._requests.late(pending)
        if pending.deliver is not None:
            pending.deliver(arrays, version, "")
            return
        req = pending.request
        frames = protocol.encode_prediction(req.simulation_id, req.request_id, version, arrays)
        self._reply(pending.identity, frames)

    def refuse(self, pending: Pending, reason: str, detail: str, retry_after_ms: int = 0) -> None:
        """Send `pending` a REFUSED (`reason`: a name of `protocol.REFUSAL_REASONS`)."""
        self._requests.count(f"refused_{reason}")
        if pending.deliver is not None:
            pending.deliver(None, self.version, f"{reason}: {detail}")
            return
        req = pending.request
        frame = protocol.encode_refused(
            req.simulation_id, req.request_id, self.version, reason, detail, retry_after_ms
        )
        self._reply(pending.identity, [frame])

    def submit(
        self, requests: list[tuple[dict[str, np.ndarray], Deliver]], timeout_ms: int = 0
    ) -> None:
        """Queue in-process requests, `(arrays, deliver)` each, all or none
        (`deliver(outputs, version, error)` is called with its answer, by the thread that
        drains the queue): a caller refused has none of them run later, unseen.

        Raises:
            ServingRefused: not serving, or the queue has no room for them all.
            ValueError: arrays that are not the declared inputs, or hold NaN or Inf
                under the ``nonfinite`` policy (`serving_requests.arrays_problem`).
        """
        for arrays, _ in requests:
            problem = arrays_problem(arrays, self.inputs, self.nonfinite)
            if problem is not None:
                raise ValueError(problem)
        now, request = time.monotonic(), lambda a: PredictRequest(0, 0, timeout_ms, None, a)
        pending = [Pending(request(a), now, 0, None, d) for a, d in requests]
        refusal = self._requests.offer(*pending)
        if refusal is not None:
            self._requests.count(f"refused_{refusal[0]}", len(pending))
            raise ServingRefused(*refusal)

    def telemetry(self) -> dict[str, int]:
        """Counters: requests, answered, expired, described (DESCRIBEs answered),
        refused_<reason>, rejected_<reason>."""
        return self._requests.telemetry()

    def _reply(self, identity: bytes | None, frames: list[Any]) -> None:
        socks = self._sockets  # (None: not started, or stopped; nothing sent)
        if socks is not None:
            socks.reply(identity, frames, threading.current_thread() is self._thread)

    def _queue_or_refuse(self, pending: Pending) -> None:
        """Queue a peer's `pending` (`RequestQueue.offer`), or refuse it (not serving, full)."""
        refusal = self._requests.offer(pending)
        if refusal is not None:
            self.refuse(pending, *refusal, retry_after_ms=100)

    # -- the I/O thread --------------------------------------------------------------

    def _run(self) -> None:
        assert self._sockets is not None
        router, replies = self._sockets.router, self._sockets.replies_in
        assert router is not None and replies is not None
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(replies, zmq.POLLIN)
        while not self._stop.is_set():
            ready = dict(poller.poll(_POLL_MS))
            if replies in ready:
                forward_answers(replies, router)
            if router in ready:
                for _ in range(_BURST):  # (then the answers again: a flood delays none)
                    try:
                        frames = router.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._handle(router, frames)
            self._summary.tick()
        forward_answers(replies, router)  # the last answers (`stop`'s refusals) go out too

    def _handle(self, router: zmq.Socket, frames: list[zmq.Frame]) -> None:
        identity, parts = frames[0].bytes, [f.buffer for f in frames[1:]]
        try:
            if is_describe(parts):  # (the inputs, for a client given the endpoint)
                reply = described(parts, self.inputs, self.version)
                self._requests.count("described")
                router.send_multipart([identity, reply])
                return
            request = decode_request(parts, self.inputs, self.max_request_bytes)
        except ProtocolError as exc:
            self._reject(router, identity, parts, exc)
            return
        run_id = request.run_id
        if run_id is not None and self._run_id is not None and run_id != self._run_id:
            pending = Pending(request, time.monotonic(), self.version, identity)
            self._requests.count("requests")
            self.refuse(pending, "wrong_run", f"this trainer is run {self._run_id}")
            return
        refusal = nonfinite_refusal(request, self.nonfinite, self.version)
        if refusal is not None:  # (counted under its own reason; bad_request on the wire)
            sim, (detail, frame) = request.simulation_id, refusal
            self._requests.count("requests")
            self._requests.count("refused_nonfinite")
            why = f"serving of rank {self.rank}: refused a request of simulation {sim}: {detail}"
            self._summary.event(REJECTED, "nonfinite", sim, why)
            router.send_multipart([identity, frame])
            return
        self._queue_or_refuse(Pending(request, time.monotonic(), self.version, identity))

    def _reject(
        self, router: zmq.Socket, identity: bytes, parts: list[Any], exc: ProtocolError
    ) -> None:
        """Count and log a malformed request; refuse it if it can be named."""
        head = parts[0] if parts else b""
        sim = protocol.peek_simulation_id(head)
        self._requests.count(f"rejected_{exc.reason}")
        self._summary.event(
            REJECTED, exc.reason, sim, f"serving of rank {self.rank}: rejected a request: {exc}"
        )
        request_id = protocol.peek_request_id(head)
        if request_id is not None and sim is not None:
            frame = protocol.encode_refused(sim, request_id, self.version, "bad_request", str(exc))
            router.send_multipart([identity, frame])
