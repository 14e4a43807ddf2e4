"""The worker side of worker mode (Melissa's ``fetch_next_parameters``).

For solvers whose start-up is expensive, a `Launcher(..., worker=True)` starts long-lived
*workers* that run one simulation after another. `serve_simulations` is a worker's
whole loop::

    from melissa_trainer.client import Client
    from melissa_trainer.client.worker import serve_simulations

    solver = ExpensiveSolver()                        # set up once

    def run(simulation_id, parameters, context):
        with Client(fields, simulation_id=simulation_id, parameters=parameters,
                    context=context) as client:
            for t, u in solver.run(**parameters):
                client.send(t, u=u)

    serve_simulations(run, check=solver.check)       # returns when nothing is left

It gives every `Client` one context for the worker's life, which spares each simulation
the making and ending of its own (its cost: docs/measured.md, "Design choices,
measured"). Because that context, and the process, outlive the simulation, its
`Client.close` returns only once every receiver confirmed it *ingested* the BYE (the
RECEIPT_QUERY exchange of external mode, `melissa_trainer.client.confirm`, without its
replay window): the worker then reports the simulation finished. Before, a close
returned once ZeroMQ had taken the BYE from its queue, and once (CI, a loaded machine) a
worker SIGKILLed right after took the last steps and BYE, still in the context's I/O
thread, with it (1 of 5 steps arrived; the launcher found the simulation incomplete and
ran it again): tests/client/test_worker_receipt.py. Not confirmed (a receiver gone, or a
trainer restarted from a checkpoint without the BYE), the close raises
`gave_up.DeliveryFailed` (a `TimeoutError`) within the bounds `confirm` names
(``close_timeout``, ``disconnected_timeout``), the simulation is never reported
finished: `serve_simulations` reports it failed (`NOT_DELIVERED_EXIT_CODE`) and goes on
with the next, its process and start-up kept; the launcher counts a failed attempt and
runs it again. The confirmation's cost, a round trip per simulation (about 1.3 ms on
loopback): docs/how-to/own-solver.md, worker mode. A loop written by hand (an MPI
worker's, where rank 0 calls `next_simulation` and broadcasts the answer; a barrier
after every rank's close, whose confirmation is its own, so that rank 0 reports a
simulation finished only once all its ranks' BYEs were ingested) uses `next_simulation`:
each call reports the previous simulation as finished (or failed: ``exit_code=1``, for a
solver that catches its own failure and goes on) and asks for the next one; None means
nothing is left (the worker should exit 0). A worker that dies loses its current
simulation, which the launcher gives to another request; those it reported finished were
confirmed (above).

The launcher passes its endpoint in ``MELISSA_TRAINER_LAUNCHER``, the worker's name in
``MELISSA_TRAINER_WORKER`` and, when it listens beyond loopback, its CURVE public key in
``MELISSA_TRAINER_LAUNCHER_KEY`` (requests are then encrypted, and only peers that know
the key get answers) and, where ``/proc`` says, its process in
``MELISSA_TRAINER_LAUNCHER_PROCESS`` (`worker_launcher.launcher_gone`: a worker whose
launcher ended says so before a request, not after its timeout). Messages are JSON over
a ZeroMQ REQ socket (never pickle), each with ``"version"`` (`PROTOCOL_VERSION`). A
request is ``{"worker": NAME, "finished": ID or null}``, with ``"exit_code"`` when that
simulation failed. The answer is ``{"simulation_id": ID, "parameters": {...}, "attempt":
N}`` (N the launcher's count, 0 the first; absent, from an older launcher: 0),
``{"simulation_id": null}`` (nothing left), ``{"simulation_id": null, "retry":
SECONDS}`` (ask again) or ``{"error": TEXT}``. This module imports only the standard
library, pyzmq, `gave_up`, `worker_codes`, `worker_context` and `worker_launcher`
(standard library only; the `client` package imports its names on first use).

A simulation a worker is given again after a resume (attempt above 0, as for a launched
process's ``MELISSA_TRAINER_ATTEMPT``) sends only the time steps its receivers'
checkpoint lacks: its `Client` reads the attempt with `given_attempt`
(`melissa_trainer.client.rerun`). Only in the process that asked: an MPI worker's other
ranks, given the simulation by rank 0, send every step (their receivers drop what they
hold). Likewise that `Client` counts as launched (`config.launched`): the launcher runs
its simulation again if it fails, so it keeps no replay window and does not ask for its
admission while it runs, as a launched process's (its close asks for the BYE's receipt:
above); a `Client` of another simulation id (or an MPI worker's other ranks) does both,
as in external mode.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from melissa_trainer.client import worker_given
from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE, REFUSED_EXIT_CODE
from melissa_trainer.client.worker_context import end_context
from melissa_trainer.client.worker_launcher import (
    ENV_LAUNCHER,
    ENV_LAUNCHER_KEY,
    ENV_WORKER,
    LauncherGone,
    NotAWorker,
    launcher_gone,
    launcher_missing,
    parent_gone,
)

__all__ = ["PROTOCOL_VERSION", "WorkerClient", "next_simulation", "serve_simulations"]

#: Version of the JSON messages.
PROTOCOL_VERSION = 1


class WorkerClient:
    """A worker's connection to its launcher. Not thread-safe (one ZeroMQ socket).

    Args:
        endpoint: the launcher's endpoint; default ``$MELISSA_TRAINER_LAUNCHER``.
        name: this worker's name; default ``$MELISSA_TRAINER_WORKER``.
        timeout: how long, in seconds, one request may wait for the launcher's answer
            (None: forever).
        curve_server_key: the launcher's CURVE public key (Z85); default
            ``$MELISSA_TRAINER_LAUNCHER_KEY``, else none (a loopback launcher).

    Raises:
        NotAWorker: not started by a launcher in worker mode (no endpoint or name: a
            `RuntimeError`, its message what is missing and how a worker is started).
        RuntimeError: a CURVE key that is not one.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        name: str | None = None,
        timeout: float | None = 60.0,
        curve_server_key: str | None = None,
    ) -> None:
        key = curve_server_key or os.environ.get(ENV_LAUNCHER_KEY, "").strip() or None
        if key is not None and len(key) != 40:
            raise RuntimeError(
                f"the launcher's CURVE key ({ENV_LAUNCHER_KEY} or curve_server_key) must be "
                f"the 40-character Z85 public key the launcher gave, not {key!r}"
            )
        self.curve_server_key = key
        endpoint = endpoint or os.environ.get(ENV_LAUNCHER, "").strip()
        name = name or os.environ.get(ENV_WORKER, "").strip()
        if not endpoint or not name:  # (what is missing of the two, said)
            raise NotAWorker(launcher_missing({ENV_LAUNCHER: endpoint, ENV_WORKER: name}))
        self.endpoint, self.name, self.timeout = endpoint, name, timeout
        self.current: int | None = None  # the simulation being run, reported on the next call
        #: the launcher's attempt of `current` (0 the first), None without one
        self.attempt: int | None = None
        self._exhausted = False
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None

    def next_simulation(self, exit_code: int = 0) -> tuple[int, dict[str, float]] | None:
        """Report the current simulation as finished (`exit_code` 0) or failed (any other
        code: what its process would have exited with); return the next one's
        ``(simulation_id, parameters)``, or None when nothing is left. Blocks until the
        launcher answers. The launcher's attempt of the simulation returned is then
        `attempt` (and `given_attempt`'s, for its `Client`).

        A failed simulation is a failed attempt, as if the worker had exited with that
        code (restarted, then redrawn, as `LauncherTuning` says), but the worker lives
        on: a solver that catches its own failure does not pay its start-up again.

        Raises:
            LauncherGone: the launcher's process has ended (`launcher_gone`, checked
                before each request: no answer would come), the current one unreported.
            TimeoutError: no answer within `timeout` (the launcher is gone or stuck).
            RuntimeError: the launcher refused the request.
            ValueError: `exit_code` is not an int.
        """
        if isinstance(exit_code, bool) or not isinstance(exit_code, int):
            raise ValueError(f"exit_code must be an int (0: finished), not {exit_code!r}")
        if self._exhausted:
            return None
        while True:
            if (gone := launcher_gone(self.current)) is not None:  # (no answer would come)
                self.close()
                raise LauncherGone(gone)
            message = {"version": PROTOCOL_VERSION, "worker": self.name, "finished": self.current}
            if exit_code and self.current is not None:  # (absent: finished, as before)
                message["exit_code"] = exit_code
            reply = self._request(message)
            if "error" in reply:
                raise RuntimeError(f"the launcher refused worker {self.name}: {reply['error']}")
            self._give(None, None)
            retry = reply.get("retry")
            if retry is None:
                break
            # The launcher waits for earlier simulations' data (it bounds the data in
            # flight to its job_limit): ask again.
            time.sleep(min(max(float(retry), 0.001), 1.0))
        simulation_id = reply.get("simulation_id")
        if simulation_id is None:
            self._exhausted = True
            self.close()
            return None
        parameters = {str(k): float(v) for k, v in reply["parameters"].items()}
        attempt = reply.get("attempt", 0)  # (absent: a launcher older than the field)
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise RuntimeError(
                f"worker {self.name}: the launcher gave simulation {simulation_id} "
                f"attempt={attempt!r}, not an int >= 0"
            )
        self._give(int(simulation_id), attempt)
        return int(simulation_id), parameters

    def _give(self, simulation_id: int | None, attempt: int | None) -> None:
        """Record the simulation this worker runs now (None: none) and its attempt."""
        self.current, self.attempt = simulation_id, attempt
        worker_given.give(simulation_id, attempt)

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._socket is None:
            self._context = zmq.Context()
            self._socket = self._context.socket(zmq.REQ)
            self._socket.setsockopt(zmq.LINGER, 0)
            if self.curve_server_key is not None:
                public, secret = zmq.curve_keypair()  # this worker's, for the session only
                self._socket.curve_serverkey = self.curve_server_key.encode("ascii")
                self._socket.curve_publickey, self._socket.curve_secretkey = public, secret
            self._socket.connect(self.endpoint)
        # (capped at ZeroMQ's C int of ms, 24.8 days: pyzmq raises past it; +inf too)
        wait = -1 if self.timeout is None else max(1, int(min(self.timeout * 1000, 2**31 - 1)))
        self._socket.setsockopt(zmq.RCVTIMEO, wait)
        self._socket.setsockopt(zmq.SNDTIMEO, wait)
        try:
            self._socket.send(json.dumps(message).encode())
            answer = self._socket.recv()
        except zmq.Again:
            self.close()  # a REQ socket without its reply cannot be used again
            raise TimeoutError(
                f"worker {self.name}: no answer from the launcher at {self.endpoint} within "
                f"{self.timeout} s"
            ) from None
        reply = json.loads(answer)
        if not isinstance(reply, dict) or reply.get("version") != PROTOCOL_VERSION:
            raise RuntimeError(
                f"worker {self.name}: unexpected answer from the launcher: {reply!r}"
            )
        return reply

    def close(self) -> None:
        """Release the socket (idempotent)."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        if self._context is not None:
            self._context.term()
            self._context = None


_default: WorkerClient | None = None


def next_simulation(
    timeout: float | None = 60.0, exit_code: int = 0
) -> tuple[int, dict[str, float]] | None:
    """`WorkerClient.next_simulation` on this process's worker connection (made at the
    first call from the environment: `NotAWorker` without a launcher's): `exit_code`
    non-zero reports the simulation just run as failed, and the worker goes on."""
    global _default
    if _default is None:
        _default = WorkerClient(timeout=timeout)
    _default.timeout = timeout
    return _default.next_simulation(exit_code)


def serve_simulations(
    run: Callable[[int, Mapping[str, float], zmq.Context], int | None],
    check: Callable[[dict[str, float]], Mapping[str, float]] | None = None,
    *,
    timeout: float | None = 60.0,
) -> None:
    """A worker's loop: run the simulations the launcher gives, one after another, until
    it says none is left (`next_simulation` returns None). Blocks; returns None then,
    and the worker should exit 0.

    For each ``(simulation_id, parameters)`` it is given:

    1. ``check(parameters)``, when given, returns the parameters `run` gets. A
       ValueError it raises refuses them: its message goes to stderr (``PROG:
       simulation ID: message``), the simulation is reported failed with exit code
       `REFUSED_EXIT_CODE` (2, as its own process would have exited) and the worker asks
       for the next (the launcher restarts, then redraws it, as `LauncherTuning` says).
    2. ``run(simulation_id, parameters, context)`` runs and streams it, passing
       `context` to its `Client` (``Client(..., context=context)``): one ZeroMQ context
       for the worker's life. `run` must close every client it opens (a ``with`` block
       does, on an exception too): a socket of the context still open when the loop
       ends is said on stderr and the context left to the process's exit, not waited
       for (its `term` would wait forever, the loop's exception never raised). It
       returns None or 0: the simulation finished; or a non-zero int: the simulation
       failed with that exit code (a solver that catches its own failure), and the
       worker goes on with the next either way. A `gave_up.DeliveryFailed` from `run`
       (a `Client`'s send or close that gave up on the trainer: gone, restarted and not
       followed, or its BYE not confirmed) is said on stderr (``PROG: simulation ID
       rank R: message``, the simulation named once): the simulation is reported failed
       with `NOT_DELIVERED_EXIT_CODE` (75) and the worker goes on, its start-up kept
       (the launcher runs it again, as for a worker that died; a trainer gone for good
       fails every simulation within its client's bounds, and the launcher's policy
       ends the study). Unless the process that started the worker has ended
       (`worker_launcher.parent_gone`: no parent-death signal reached the worker), or
       the launcher's own (`worker_launcher.launcher_gone`): no launcher takes the
       report then, and the loop ends at once with `LauncherGone`, its message the
       error and what runs the simulation again; so does a request (the first too: a
       worker orphaned before it started), `WorkerClient.next_simulation`.

    Any other exception (from `check`, from `run`, or from `next_simulation`: no answer
    within `timeout` seconds, a refusal) ends the loop: the context is terminated and
    the exception propagates; uncaught, the worker exits 1, and the launcher counts a
    failed attempt of the simulation it was running, gives it to another request and
    relaunches the worker (which pays its start-up again): the solver's state after an
    error of its own is unknown. No signal handler is installed: a SIGTERM (the
    launcher's, or a batch system's) ends the process as Python's default does, its
    current simulation, if any, a failed attempt as above.

    Raises:
        NotAWorker: not started by a launcher in worker mode (`WorkerClient`), before
            any simulation runs.
        LauncherGone: the worker's launcher gone (above), before any simulation too.
        ValueError: `run` returned something that is not None or an int.
    """
    program = os.path.basename(sys.argv[0]) or "worker"
    # (the process that started this worker: ended, no launcher counts on it any more)
    parent = os.getppid()
    context = zmq.Context()  # one for the worker's life, not one per simulation
    try:
        code = 0
        while (work := next_simulation(timeout=timeout, exit_code=code)) is not None:
            simulation_id, parameters = work
            try:
                checked = parameters if check is None else check(parameters)
            except ValueError as exc:
                print(f"{program}: simulation {simulation_id}: {exc}", file=sys.stderr)
                code = REFUSED_EXIT_CODE
                continue
            try:
                result = run(simulation_id, checked, context)
            except DeliveryFailed as exc:  # (the trainer's side: this process is sound)
                said = _about(simulation_id, exc)
                gone = parent_gone(parent, simulation_id) or launcher_gone(simulation_id)
                if gone is not None:
                    raise LauncherGone(f"{said.rstrip('.')}. {gone}") from None
                print(
                    f"{program}: {said} (this worker reports it failed, exit code "
                    f"{NOT_DELIVERED_EXIT_CODE}, and goes on to its next simulation)",
                    file=sys.stderr,
                )
                code = NOT_DELIVERED_EXIT_CODE
                continue
            if result is not None and (isinstance(result, bool) or not isinstance(result, int)):
                raise ValueError(
                    f"serve_simulations: run returned {result!r} for simulation "
                    f"{simulation_id}: return None or 0 (finished) or an int exit code (failed)"
                )
            code = result or 0
    finally:
        end_context(context, program)


def _about(simulation_id: int, exc: Exception) -> str:
    """`exc`'s message about `simulation_id`, which it names once: a client's error
    names it already ("simulation 1 rank 0: ..."), another is prefixed with it."""
    text = str(exc)
    if re.match(rf"simulation {simulation_id}\b", text):
        return text
    return f"simulation {simulation_id}: {text}"
