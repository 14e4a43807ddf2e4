"""Predictions from the trainer's current model, asked by a running simulation
(docs/protocol.md, section 16): `Predictor`, behind `Client.predict`.

```python
try:
    outputs, version = client.predict({"u": u}, timeout=0.5)
    guess = outputs["u_next"]          # the model of training step `version`
except PredictionUnavailable:          # busy, not serving yet, restarting, gone
    guess = u                          # the simulation's own fallback
```

* Where: the serving socket of training rank ``simulation_id % W``, published in
  ``serve_{rank}.json`` of the rendezvous directory (`$MELISSA_TRAINER_RENDEZVOUS`,
  with the inputs it takes, the run's id and its CURVE key), or
  `$MELISSA_TRAINER_SERVE_ENDPOINTS` (comma-separated, in rank order) with the servers'
  CURVE public key in `$MELISSA_TRAINER_SERVE_KEY` when they use CURVE (the stream's
  ``ReceiverConfig.curve_public_key``: every rank serves with it). Looked up at the
  first request, and again after a failure (a restarted trainer publishes another
  endpoint); until it is published a request waits, up to its timeout (a trainer
  starting), unless a trainer served there before and has removed its file (it
  stopped): then the request fails at once, and the next one looks again.
* Failures a simulation falls back from, all `PredictionUnavailable`:
  `PredictTimeout` (also a `TimeoutError`: no answer in time; the trainer is busy
  beyond the timeout, restarting or gone) and `PredictRefused` (the trainer said no:
  `reason` ``busy`` when requests outpace the model, ``not_serving`` before its first
  step or after its last, ``wrong_run``, ``bad_request``, ``failed``). A request is never
  left queued behind a dead trainer: the socket sends only over a live connection
  (``ZMQ_IMMEDIATE``), and is closed after a failure (a late answer is dropped). A
  trainer whose process is gone is not waited for: a request whose connection drops
  while it waits, and one whose endpoint refuses the connection (nothing listens there:
  a dead trainer's serve file), raise `PredictTimeout` at once (the socket's monitor
  says so); only an unreachable host (a node gone) takes the whole timeout.
* A server that refuses this client's handshake (it takes CURVE connections only and
  the key is missing, or is not its key) raises ValueError naming the endpoint and the
  fix, as soon as the handshake fails: a mistake to fix, not a fallback.
* Inputs that are not the published ones (names, dtypes, shapes) raise ValueError
  before anything is sent; without a rendezvous (`endpoint=`,
  `$MELISSA_TRAINER_SERVE_ENDPOINTS`: the inputs are not known here), once the trainer
  refuses them (its detail names them): a mistake to fix, not a fallback.

Not thread-safe (one per thread, like `Client`). Imports the standard library, numpy,
pyzmq and the shared `stream` modules only.
"""

from __future__ import annotations

import itertools
import math
import os
import struct
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.config import ENV_RENDEZVOUS
from melissa_trainer.client.predict_errors import (
    Predicted,
    PredictionUnavailable,
    PredictRefused,
    PredictTimeout,
    handshake_refused,
)
from melissa_trainer.stream.serving_rendezvous import check_inputs, read_serving
from melissa_trainer.wire import FieldSpec, Prediction, ProtocolError

__all__ = [
    "ENV_SERVE_ENDPOINTS",
    "ENV_SERVE_KEY",
    "PredictRefused",
    "PredictTimeout",
    "Predicted",
    "PredictionUnavailable",
    "Predictor",
]

#: Comma-separated serving endpoints, in training-rank order (else the rendezvous).
ENV_SERVE_ENDPOINTS = "MELISSA_TRAINER_SERVE_ENDPOINTS"
#: The serving sockets' CURVE public key (Z85) for endpoints not read from a rendezvous.
ENV_SERVE_KEY = "MELISSA_TRAINER_SERVE_KEY"
#: the monitor events of a handshake the server refused (a missing or wrong CURVE key)
_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
#: the monitor events of a trainer gone: a connection attempt that failed (refused:
#: nothing listens there), and an established connection dropped
_GONE = zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_DISCONNECTED
#: After a trainer was found gone (a connection refused or lost, its serve file
#: removed), requests fail at once without dialling for a backoff that doubles from the
#: first to the second (seconds): no socket per request while the trainer is away (a
#: solver asking in a loop made thousands a second: "Too many open files").
_BACKOFF = (0.05, 1.0)
#: Default seconds a `predict` waits for its answer.
DEFAULT_PREDICT_TIMEOUT = 10.0
_MAX_REPLY_BYTES = 1 << 30
_MAX_TIMEOUT_MS = 2**32 - 1  # (PREDICT's timeout field, docs/protocol.md section 16)
#: the details of a `bad_request` refusal for inputs that are not the declared ones
_NOT_THE_INPUTS = ("bad_inputs:", "too_large:")


def _poll_ms(left: float) -> int:
    """Milliseconds for one ZeroMQ poll of a wait of `left` seconds: at least 1, at
    most an hour (a poll's timeout is a C int: 24.8 days overflow it; the callers poll
    again until their deadline)."""
    return max(1, min(int(left * 1000), 3_600_000))


class Predictor:
    """Asks the trainer's serving socket for predictions (module docstring).

    Args:
        simulation_id: sent with each request; it chooses the rank (``id % W``).
        endpoint: the serving endpoint to use; default: `$MELISSA_TRAINER_SERVE_ENDPOINTS`,
            else the rendezvous directory.
        rendezvous_dir: default `$MELISSA_TRAINER_RENDEZVOUS`.
        run_id: sent with each request (a trainer of another run refuses it), and serve
            files of another run are ignored.
        curve_server_key: the Z85 CURVE key of `endpoint` and of the endpoints of
            `$MELISSA_TRAINER_SERVE_ENDPOINTS`; default `$MELISSA_TRAINER_SERVE_KEY` (a
            rendezvous gives its own).
        context: a ZeroMQ context to use (default: one of its own, ended by `close`).
    """

    def __init__(
        self,
        simulation_id: int,
        *,
        endpoint: str | None = None,
        rendezvous_dir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        curve_server_key: str | None = None,
        context: zmq.Context | None = None,
    ) -> None:
        self.simulation_id = simulation_id
        self.run_id = None if run_id is None else protocol.check_run_id(run_id, "run_id")
        self._endpoint, self._key = endpoint, curve_server_key
        self._rendezvous = rendezvous_dir
        self._own_context = context is None
        self._context = zmq.Context() if context is None else context
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None  # the socket's handshake failures
        self._connected: tuple[str, str | None] = ("", None)  # its endpoint and key
        self._key_given = False  # that key was given (argument, environment), not read
        self._served_there = False  # a serve file was found in the rendezvous before
        # a trainer found gone: why, when to dial again, and the backoff (`_gone`)
        self._gone_why, self._retry_at, self._backoff = "", 0.0, 0.0
        self._inputs: list[FieldSpec] | None = None
        self._ids = itertools.count(1)
        self._closed = False

    def predict(
        self, inputs: Mapping[str, Any], timeout: float = DEFAULT_PREDICT_TIMEOUT
    ) -> Predicted:
        """The trainer's prediction for `inputs` (`{name: array}`, the declared inputs).

        Blocks up to `timeout` seconds in all (the lookup of the endpoint included).

        Raises:
            PredictTimeout, PredictRefused: no prediction (both `PredictionUnavailable`).
            ValueError: inputs that are not the published ones (or, without a
                rendezvous, that the trainer refused as not its inputs), or a timeout
                that is not a finite number of seconds > 0.
            RuntimeError: the predictor is closed.
        """
        if self._closed:
            raise RuntimeError("the predictor is closed")
        if not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a finite number of seconds > 0, not {timeout!r}")
        now = time.monotonic()
        if self._socket is None and now < self._retry_at:
            raise PredictTimeout(
                f"{self._gone_why} (at an earlier request; the next attempt in "
                f"{self._retry_at - now:.2f} s at most)"
            )
        deadline = now + timeout
        sock = self._connect(deadline)
        arrays = self._arrays(inputs)
        request_id = next(self._ids)
        # (the wire's timeout is a u32 of milliseconds: a longer wait is sent as its
        # largest, 49.7 days, as the C client does; the trainer drops a request only
        # once it is older than that)
        timeout_ms = min(max(1, round(timeout * 1000)), _MAX_TIMEOUT_MS)
        frames = protocol.encode_predict(
            self.simulation_id, request_id, timeout_ms, self.run_id, arrays
        )
        self._wait_connected(sock, deadline, timeout)
        self._lost()  # (the events of earlier connections: a drop from now on counts)
        try:
            sock.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
        except zmq.Again:  # (the connection went since the poll)
            self._reset()
            raise PredictTimeout("the connection to the trainer's serving endpoint went") from None
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        if self._monitor is not None:
            poller.register(self._monitor, zmq.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._reset()
                raise PredictTimeout(f"no prediction within {timeout} s (the trainer busy or gone)")
            ready = dict(poller.poll(_poll_ms(left)))
            if sock not in ready:
                if self._monitor in ready and self._lost():
                    # The connection the request went on is gone: its answer cannot
                    # come (a new connection is another peer to the trainer's socket).
                    raise self._gone(
                        f"the connection to the trainer's serving endpoint "
                        f"{self._connected[0]} was lost while the request waited for its "
                        "answer (the trainer stopped or died)"
                    )
                continue  # (a long wait, polled in parts: `_poll_ms`)
            reply = sock.recv_multipart(copy=False)
            try:
                message = protocol.decode_reply([f.buffer for f in reply], _MAX_REPLY_BYTES)
            except ProtocolError as exc:
                self._reset()
                raise PredictionUnavailable(f"a malformed reply from the trainer: {exc}") from None
            if message.request_id != request_id:
                continue  # the late answer of an earlier request
            self._backoff = 0.0  # (a trainer answers there)
            if isinstance(message, Prediction):
                return Predicted(message.arrays, message.version)
            if message.reason == "bad_request" and message.detail.startswith(_NOT_THE_INPUTS):
                # The error a published rendezvous gives before sending: a simulation
                # that falls back on `PredictionUnavailable` would otherwise fall back
                # on every request, silently, for a mistake in its own code.
                raise ValueError(f"predict(): the trainer refused the inputs: {message.detail}")
            raise PredictRefused(
                message.reason, message.detail, message.retry_after_ms / 1000, message.version
            )

    def close(self) -> None:
        """Close the socket (and the context, if its own). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._reset()
        if self._own_context:
            self._context.term()

    def __enter__(self) -> Predictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------

    def _reset(self) -> None:
        if self._socket is not None:
            if self._monitor is not None:
                self._socket.disable_monitor()
                self._monitor.close(linger=0)
                self._monitor = None
            self._socket.close(linger=0)
            self._socket = None

    def _wait_connected(self, sock: zmq.Socket, deadline: float, timeout: float) -> None:
        """Block until `sock` has a connection to send on (``ZMQ_IMMEDIATE``), up to
        `deadline`; a handshake the server refused raises ValueError at once."""
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLOUT)
        if self._monitor is not None:
            poller.register(self._monitor, zmq.POLLIN)
        undetailed = 0
        refused = False  # a connection attempt failed (and no handshake was refused)
        while True:
            left = deadline - time.monotonic()
            ready = dict(poller.poll(_poll_ms(left))) if left > 0 else {}
            if sock in ready:
                return
            while self._monitor is not None and self._monitor.poll(0):
                event = self._event()
                if event & _GONE:
                    refused = refused or event == zmq.EVENT_CONNECT_RETRIED
                    continue
                # A mechanism mismatch (CURVE on one side only) is certain at once. A
                # failure without detail is also a connection lost mid-handshake (a
                # trainer stopping): a key given here, refused twice in a row, is not the
                # server's; one read from the rendezvous may be stale (a restarted
                # trainer's new key), which the lookup after a timeout reads again.
                undetailed += event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                if event != zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL or (
                    undetailed >= 2 and self._key_given
                ):
                    raise self._refused_handshake()
            if refused and not undetailed:
                # Nothing listens there (a dead trainer's port refuses at once): fall
                # back now, not at the timeout; ZeroMQ would retry the connection every
                # 0.1 s in vain until then. (After a handshake failure, the retry is the
                # handshake's: the rule above decides.)
                raise self._gone(
                    f"the trainer's serving endpoint {self._connected[0]} refused the "
                    "connection: nothing listens there (the trainer is gone or restarting)"
                )
            if left <= 0:
                self._reset()
                raise PredictTimeout(
                    f"no connection to the trainer's serving endpoint within {timeout} s "
                    "(the trainer is gone or restarting)"
                )

    def _gone(self, why: str) -> PredictTimeout:
        """The trainer is gone (`why`): close the socket, and fail the requests of the
        next backoff at once (`_BACKOFF`); the one after it looks the endpoint up again."""
        self._reset()
        first, most = _BACKOFF
        self._backoff = min(most, 2 * self._backoff) if self._backoff else first
        self._gone_why, self._retry_at = why, time.monotonic() + self._backoff
        return PredictTimeout(f"{why}; the next request looks the endpoint up again")

    def _event(self) -> int:
        """The next event of the socket's monitor (parsed here: zmq.utils.monitor
        imports asyncio into a solver)."""
        assert self._monitor is not None
        return int(struct.unpack("=H", self._monitor.recv_multipart()[0][:2])[0])

    def _lost(self) -> bool:
        """Whether the monitor's waiting events say the connection dropped."""
        lost = False
        while self._monitor is not None and self._monitor.poll(0):
            lost = self._event() == zmq.EVENT_DISCONNECTED or lost
        return lost

    def _refused_handshake(self) -> ValueError:
        endpoint, key = self._connected
        self._reset()
        return handshake_refused(endpoint, key, ENV_RENDEZVOUS, ENV_SERVE_KEY)

    def _connect(self, deadline: float) -> zmq.Socket:
        if self._socket is not None:
            return self._socket
        endpoint, key, given = self._resolve(deadline)
        sock = self._context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # never queue a request for a peer not there
        if key is not None:
            if len(key) != 40:
                sock.close(linger=0)
                raise ValueError(
                    f"the serving endpoint's CURVE key (curve_server_key or {ENV_SERVE_KEY}) "
                    f"must be the 40-character Z85 public key, not {key!r}"
                )
            sock.curve_serverkey = key.encode("ascii")
            sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        monitor = sock.get_monitor_socket(_HANDSHAKE_FAILED | _GONE)
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as exc:
            sock.disable_monitor()
            monitor.close(linger=0)
            sock.close(linger=0)
            raise ValueError(f"cannot connect to serving endpoint {endpoint!r}: {exc}") from None
        self._socket, self._monitor, self._connected = sock, monitor, (endpoint, key)
        self._key_given = key is not None and given
        return sock

    def _resolve(self, deadline: float) -> tuple[str, str | None, bool]:
        """The endpoint of the rank that serves this simulation, its CURVE key, and
        whether that key was given (an argument, the environment; else the rendezvous)."""
        key = self._key or os.environ.get(ENV_SERVE_KEY, "").strip() or None
        if self._endpoint is not None:
            return self._endpoint, key, True
        listed = os.environ.get(ENV_SERVE_ENDPOINTS, "").strip()
        if listed:
            endpoints = [e.strip() for e in listed.split(",")]
            return endpoints[self.simulation_id % len(endpoints)], key, True
        directory = self._rendezvous or os.environ.get(ENV_RENDEZVOUS, "").strip()
        if not directory:
            raise ValueError(
                f"no serving endpoint: set {ENV_RENDEZVOUS} (the trainer's rendezvous "
                f"directory) or {ENV_SERVE_ENDPOINTS}, or pass endpoint="
            )
        pause = 0.01
        while True:
            entry, why = read_serving(directory, self.simulation_id, self.run_id)
            if entry is not None:
                self._inputs = entry["inputs"]
                self._served_there = True
                return entry["endpoint"], entry.get("curve_public_key"), False
            left = deadline - time.monotonic()
            if left <= 0 or self._served_there:
                # (Waiting for a serve file is for a trainer not started yet. One that
                # served this simulation and removed its file has stopped: fall back
                # now, and look again at the next request, for a trainer resumed.)
                message = f"no serving endpoint in {str(directory)!r}: {why}"
                if self._served_there:
                    raise self._gone(f"{message} (the trainer that served this simulation stopped)")
                raise PredictTimeout(message)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.25)

    def _arrays(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """`inputs` as C-contiguous little-endian arrays, checked against the published
        inputs when known (the trainer checks them anyway)."""
        out = {}
        for name, value in inputs.items():
            arr = np.asarray(value)
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            out[str(name)] = np.ascontiguousarray(arr) if arr.ndim else arr
        if self._inputs is not None:
            problem = check_inputs(out, self._inputs)
            if problem is not None:
                raise ValueError(f"predict(): {problem}")
        return out
