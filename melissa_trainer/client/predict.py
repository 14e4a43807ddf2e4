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
  stopped): then the request fails at once, and the next one looks again; so does one
  that finds only serve files of another run than its ``run_id``. A rendezvous path
  that is not a directory is warned of once (a typo likely, the directory likely meant:
  the `Client`'s words), and each timeout's message says so too. A serve file whose
  loopback endpoint this process cannot reach (another machine's or network namespace's:
  `stream.host_scope`) fails each request at once, `PredictUnreachable` (a
  `PredictTimeout`), naming both hosts and the fix, warned of once.
* Failures a simulation falls back from, all `PredictionUnavailable`:
  `PredictTimeout` (also a `TimeoutError`: no answer in time; the trainer is busy
  beyond the timeout, stopped (a suspended job: its connection stays up, which the
  timeout says: `predict_errors.UNANSWERED`), restarting or gone) and
  `PredictRefused` (the trainer said no: `reason` ``busy`` when requests outpace the
  model, ``not_serving`` before its first step or after its last, ``wrong_run``,
  ``bad_request`` (also inputs holding NaN or Inf: sent as they are, warned of once
  per predictor, refused unless the trainer's ``nonfinite`` is ``'accept'``),
  ``failed``). A request is never
  left queued behind a dead trainer: the socket sends only over a live connection
  (``ZMQ_IMMEDIATE``), and is closed after a failure (a late answer is dropped). A
  trainer whose process is gone is not waited for: a request whose connection drops
  while it waits, and one whose endpoint refuses the connection (nothing listens there:
  a dead trainer's serve file), raise `PredictTimeout` at once (the socket's monitor
  says so); only an unreachable host (a node gone: its timeout says "no answer from
  HOST:PORT", not a refusal) and a peer that accepts the connection and never answers
  its handshake (a trainer whose process is stopped, which answers once continued;
  another program: `predict_events`, whose timeout says so) take the whole timeout. The
  TCP connect is bounded by the request's timeout, at least 2 s (ZMQ_CONNECT_TIMEOUT,
  `sockets.connect_timeout_ms`: a `Predictor` has no tuning).
* A server that refuses this client's handshake (it takes CURVE connections only and
  the key is missing, or is not its key) raises ValueError naming the endpoint and the
  fix, as soon as the handshake fails: a mistake to fix, not a fallback. So do an
  endpoint given that answers but is not a serving socket (it closes the connection at
  the handshake: a socket of another kind, most often the stream receiver's, the
  ``endpoint`` of ``rank_{r}.json``), and a host name that does not resolve (a typo);
  read from a serve file, the first is a trainer gone (`PredictTimeout`: a stale file).
* Inputs that are not the trainer's (names, dtypes, shapes) raise ValueError before
  anything is sent (so do names that are not strings: `predict_inputs`): the serve
  file publishes them; without a rendezvous (`endpoint=`,
  `$MELISSA_TRAINER_SERVE_ENDPOINTS`) the trainer is asked for them once per connection
  (`predict_describe`: a DESCRIBE before the first request). A trainer from before
  DESCRIBE refuses it: its requests go unchecked, and it refuses inputs that are not
  its own (ValueError too, its detail naming them), but closes the connection of one
  more than 1 MiB over them (`PredictTimeout`, "lost"). A mistake to fix, not a
  fallback, whatever the trainer's state: a request that no trainer can answer now
  (the backoff, a serve file removed) is checked against the serve file last read while
  the rendezvous directory is unchanged since (a trainer that publishes changes it, and
  is read first: one restarted with other inputs is not refused by the old ones), and
  for what needs no trainer (a dtype the wire does not carry, a dimension of 0);
  `_offline_check`.

Not thread-safe (one per thread, like `Client`). Where the serving rank is, the socket to
it and what says the trainer is gone are `melissa_trainer.client.predict_link`'s
(`PredictLink`); a `Predictor` asks and waits for the answer. Imports the standard
library, numpy, pyzmq and the shared `stream` modules only.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.config import ENV_RUN_ID
from melissa_trainer.client.finite_check import warn_nonfinite_inputs
from melissa_trainer.client.predict_describe import describe, lost, wait_answer
from melissa_trainer.client.predict_endpoint import EndpointLookup
from melissa_trainer.client.predict_errors import (
    Predicted,
    PredictionUnavailable,
    PredictRefused,
    PredictTimeout,
)
from melissa_trainer.client.predict_inputs import (
    checked_predictor_id,
    prepared_arrays,
    request_frames,
)
from melissa_trainer.client.predict_link import PredictLink
from melissa_trainer.client.predict_lookup import checked_endpoint
from melissa_trainer.client.server_key import check_server_key
from melissa_trainer.stream.serving_rendezvous import check_inputs
from melissa_trainer.wire import Prediction
from melissa_trainer.wire.predict_describe import Description

__all__ = ["Predictor"]

#: Default seconds a `predict` waits for its answer.
DEFAULT_PREDICT_TIMEOUT = 10.0
#: the details of a `bad_request` refusal for inputs that are not the declared ones
_NOT_THE_INPUTS = ("bad_inputs:", "too_large:")


class Predictor:
    """Asks the trainer's serving socket for predictions (module docstring).

    Args:
        simulation_id: sent with each request; it chooses the rank (``id % W``). An
            integer in [0, 2**64) (the wire's u64), else ValueError at once.
        endpoint: the serving endpoint to use; default: `$MELISSA_TRAINER_SERVE_ENDPOINTS`,
            else the rendezvous directory.
        rendezvous_dir: default `$MELISSA_TRAINER_RENDEZVOUS`.
        run_id: sent with each request (a trainer of another run refuses it), and serve
            files of another run are ignored: when only such files are there, a request
            fails at once (`PredictTimeout`, naming both runs), not at its timeout.
            Default `$MELISSA_TRAINER_RUN_ID` (the launcher's, as `Client`'s), else None:
            any run's; then a stop record (``end``, ``error``, ``nonfinite``) already in
            the rendezvous at its first look may be an earlier run's and is waited past
            (a new trainer may be starting), one that comes later fails a request at once.
        curve_server_key: the Z85 CURVE key of `endpoint` and of the endpoints of
            `$MELISSA_TRAINER_SERVE_ENDPOINTS` (str, or the bytes of
            `zmq.curve_keypair`); default `$MELISSA_TRAINER_SERVE_KEY`. A rendezvous
            gives its own: one given must be the key of the first serve file read (the
            running trainer's), as ``Client(curve_server_key=...)`` must be the
            rendezvous', and is not used after it (a restarted trainer's key is read).
        context: a ZeroMQ context to use (default: one of its own, ended by `close`).

    Raises:
        ValueError: `endpoint` not of a form to connect to (`checked_endpoint`: "has no
            port", as the C client says), here; one of
            `$MELISSA_TRAINER_SERVE_ENDPOINTS`, at the first request.
        ConfigError: (a ValueError) `curve_server_key` not a 40-character Z85 key, here
            (`server_key.check_server_key`, as `Client`'s); or, at the first request,
            not the key of the serve file read then.
    """

    def __init__(
        self,
        simulation_id: int,
        *,
        endpoint: str | None = None,
        rendezvous_dir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        curve_server_key: str | bytes | None = None,
        context: zmq.Context | None = None,
    ) -> None:
        self.simulation_id = checked_predictor_id(simulation_id)
        # (as a Client's: a launched solver's run is its launcher's, so a stop record of
        # an earlier run there is told from this run's: `EndpointLookup.find`)
        source = "run_id"
        if run_id is None and os.environ.get(ENV_RUN_ID, "").strip():
            run_id, source = os.environ[ENV_RUN_ID].strip(), ENV_RUN_ID
        self.run_id = None if run_id is None else protocol.check_run_id(run_id, source)
        key = None if curve_server_key is None else check_server_key(curve_server_key)
        if endpoint is not None:  # (else libzmq's bare "Invalid argument" at a request)
            checked_endpoint(endpoint, "Predictor(endpoint=...)")
        self._own_context = context is None
        self._context = zmq.Context() if context is None else context
        # where the serving rank is, the socket to it, and whether its trainer is gone
        lookup = EndpointLookup(self.simulation_id, self.run_id, endpoint, rendezvous_dir, key)
        lookup.run_source = source
        self._link = PredictLink(lookup, self._context)
        self._ids = itertools.count(1)
        self._closed = False
        self._warned_nonfinite = False  # (`warn_nonfinite_inputs`: once per predictor)
        #: how its warnings name the asker and itself (`speak_as`)
        self._speaker = (f"Predictor(simulation_id={self.simulation_id})", "predictor")

    def predict(
        self, inputs: Mapping[str, Any], timeout: float = DEFAULT_PREDICT_TIMEOUT
    ) -> Predicted:
        """The trainer's prediction for `inputs` (`{name: array}`, the declared inputs).

        Blocks up to `timeout` seconds in all (the lookup of the endpoint included).

        Raises:
            PredictTimeout, PredictRefused: no prediction (both `PredictionUnavailable`).
            ValueError: inputs that are not the published or described ones (or that
                a trainer from before DESCRIBE refused as not its inputs), a name that is
                not a `str` (`predict_inputs.prepared_arrays`), or a timeout that is not
                a finite number of seconds > 0.
            TypeError: `inputs` is not a mapping (at once, whatever the trainer's state).
            RuntimeError: the predictor is closed.
        """
        if self._closed:
            raise RuntimeError("the predictor is closed")
        # Before the endpoint is looked up: a mistake in the call, said as one whatever
        # the trainer's state (a user trial: an array passed bare raised the fallback's
        # PredictTimeout while the trainer was gone, AttributeError "'numpy.ndarray' object
        # has no attribute 'items'" while it served)
        if not isinstance(inputs, Mapping):
            raise TypeError(
                f"predict(): inputs must be a mapping of input names to arrays, not "
                f"{type(inputs).__name__}: pass {{'name': array}} (the names the trainer's "
                f"ServingHook(inputs=...) declares)"
            )
        # (numbers.Real: numpy's float32 and integers too, a solver's own types; a user
        # trial's float32 time-step budget was refused as "not a finite number")
        if not isinstance(timeout, numbers.Real) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a finite number of seconds > 0, not {timeout!r}")
        timeout = float(timeout)  # (its words say 1.0 s for a 1, as the C client's double)
        now = time.monotonic()
        link = self._link
        arrays = prepared_arrays(inputs)
        if not self._warned_nonfinite:  # (NaN sent all the same: the trainer's policy)
            self._warned_nonfinite = warn_nonfinite_inputs(arrays, *self._speaker)
        request_id = next(self._ids)
        deadline = now + timeout
        try:
            link.check_backoff(now)
            sock = link.connect(deadline, timeout)
            if self._reread(arrays, deadline, timeout):  # (another endpoint now)
                sock = link.connect(deadline, timeout)
        except PredictTimeout:
            # No trainer to ask now: inputs that are a mistake are said as one all the
            # same (`_offline_check`), not as the fallback's PredictTimeout (a user
            # trial: a float64 input during the backoff after a trainer gone).
            self._offline_check(arrays, request_id, timeout)
            raise
        self._check(arrays)
        frames = request_frames(self.simulation_id, request_id, timeout, self.run_id, arrays)
        link.wait_connected(sock, deadline, timeout)
        if link.lost(last=True):  # (else earlier connections' drops: from now on, any)
            raise lost(link, "as the request was about to be sent")
        if link.lookup.inputs is None and link.described is None:
            # (an endpoint given: the trainer says which inputs it serves, once per
            # connection; checked here as a serve file's, nothing sent if wrong)
            describe(link, self.simulation_id, next(self._ids), deadline, timeout)
            self._check(arrays)
        try:
            sock.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
        except zmq.Again:  # (the connection went since the poll)
            link.reset()
            raise PredictTimeout("the connection to the trainer's serving endpoint went") from None
        message = wait_answer(link, deadline, timeout, request_id, "PREDICT")
        if isinstance(message, Description):  # (not an answer to a PREDICT)
            link.reset()
            raise PredictionUnavailable(
                "a malformed reply from the trainer: a DESCRIPTION to a PREDICT"
            )
        if isinstance(message, Prediction):
            return Predicted(message.arrays, message.version)
        if message.reason == "bad_request" and message.detail.startswith(_NOT_THE_INPUTS):
            # The error a published or described spec gives before sending: a simulation
            # that falls back on `PredictionUnavailable` would otherwise fall back
            # on every request, silently, for a mistake in its own code.
            raise ValueError(f"predict(): the trainer refused the inputs: {message.detail}")
        raise PredictRefused(
            message.reason, message.detail, message.retry_after_ms / 1000, message.version
        )

    def speak_as(self, who: str, owner: str) -> None:
        """Name the asker `who` and this predictor `owner` in its warnings (a `Client`'s:
        ``simulation N``, ``client``, the C client's words); by default
        ``Predictor(simulation_id=N)``, ``predictor`` (it need not be a simulation's)."""
        self._speaker = (who, owner)

    def disconnect(self) -> None:
        """Close the socket to the trainer now (the next request connects again): before
        the end of the context it was opened in (`Client`: a transport's, ended when the
        client follows a restarted trainer; ending a context waits for its sockets)."""
        self._link.reset()

    def join(self, run_id: str | None, context: zmq.Context) -> None:
        """Ask as run `run_id` from the next request on, over sockets of `context` (for
        a predictor given its context: `Client.predict`, after the client followed a
        restarted trainer). The next request looks the new run's endpoint up at once
        (no backoff); one made while the new run publishes no serve file yet fails at
        once, as after a trainer that stopped (not at its timeout)."""
        if self._own_context:
            raise RuntimeError("join() is for a predictor given its context")
        self.run_id = None if run_id is None else protocol.check_run_id(run_id, "run_id")
        self._context = context
        self._link.join(self.run_id, context)

    def close(self) -> None:
        """Close the socket (and the context, if its own). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._link.reset()
        if self._own_context:
            self._context.term()

    def __enter__(self) -> Predictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------

    def _reread(self, arrays: dict[str, np.ndarray], deadline: float, timeout: float) -> bool:
        """Read the serve file again when `arrays` are not the inputs read with it and
        the rendezvous directory changed since (a trainer restarted with other inputs
        at the same endpoint, a fixed bind: the open socket reconnected to it, and every
        request of its inputs was refused, checked against the old file's, a user trial);
        True if the socket was closed (the file names another endpoint or key). Nothing
        read while the inputs match (no ``stat`` per request)."""
        link = self._link
        lookup = link.lookup
        if link.socket is None or lookup.inputs is None:
            return False
        if check_inputs(arrays, lookup.inputs) is None or not lookup.changed():
            return False
        endpoint, key, _ = lookup.find(deadline, timeout, link.gone)
        if (endpoint, key) == link.connected:
            return False
        link.reset()
        return True

    def _offline_check(
        self, arrays: dict[str, np.ndarray], request_id: int, timeout: float
    ) -> None:
        """Raise ValueError when `arrays` are a mistake though no trainer can be asked
        now (the request is about to fail `PredictTimeout`): not the inputs of the serve
        file last read for this simulation's rank, while the rendezvous directory has not
        changed since that lookup (a trainer that publishes its serve file changes it:
        a restarted trainer, which may declare other inputs, ends the backoff, and its
        file is read before the inputs are checked), or not of a form the wire carries
        (`predict_inputs.request_frames`). Inputs a trainer described (an endpoint
        given) are known only over its connection: without one, only the form is
        checked."""
        lookup = self._link.lookup
        if lookup.inputs is not None and not lookup.changed():  # (one ``stat``)
            self._check(arrays)
        request_frames(self.simulation_id, request_id, timeout, self.run_id, arrays)

    def _check(self, arrays: dict[str, np.ndarray]) -> None:
        """ValueError when `arrays` are not the inputs published (a serve file) or
        described (an endpoint given: `predict_describe`); nothing when not known."""
        if self._link.inputs is not None:
            problem = check_inputs(arrays, self._link.inputs)
            if problem is not None:
                raise ValueError(f"predict(): {problem}")
