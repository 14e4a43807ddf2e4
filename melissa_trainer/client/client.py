"""`Client`, the API a simulation calls to stream its fields (example: the package doc).

Imports only the standard library, numpy, pyzmq and the modules of this package both
sides share (wire, endpoints, step_set, config.reading): a simulation needs neither
torch, nor accelerate, nor the receiving side. The wire format: `docs/protocol.md`.

Semantics worth knowing (details in the docstrings of `Client` and `Client.send`):

* Configuration: `simulation_id` and `endpoints` default to the environment variables
  `MELISSA_TRAINER_SIMULATION_ID` and `MELISSA_TRAINER_ENDPOINTS` (or
  `MELISSA_TRAINER_RENDEZVOUS`, a directory the trainer's receivers publish to), the
  run id to `MELISSA_TRAINER_RUN_ID` (a rendezvous of another run is refused).
* Back-pressure: a send blocks while the trainer is slow or paused (never drops);
  `send_timeout` bounds how long, after which `TimeoutError` is raised. A trainer that
  is gone is not waited for: `TimeoutError` after `ClientTuning.disconnected_timeout`
  (`send_wait`).
* Tuning (buffering, batching, the rendezvous' and `close`'s timeouts): `ClientTuning`.
* Arrays above `INLINE_MAX_BYTES` are sent without a copy, and by default `send`
  returns only once ZeroMQ has released them, so the caller may overwrite its array as
  soon as `send` returns (`array_reuse` for double-buffered codes and for codes that
  compute a new array every step). Smaller ones are copied, into batches.
* Float fields are checked for NaN and Inf before they leave (`finite_check`): a
  field that passes carries FLAG_FINITE and the trainer does not check it again; one
  that fails is sent without it (the trainer applies its ``nonfinite`` policy), and
  the client logs one warning naming the step and the field.
* A client object belongs to one thread (ZeroMQ sockets are not thread-safe).

How the messages reach the receivers (the sockets, batches, large arrays held, the
BYE and what `close` waits for) is `transport`'s; `send`, `flush` and `steps_sent` are
`sending`'s (a base class); this module is the rest of the API and its checks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client import forked
from melissa_trainer.client.admission_watch import AdmissionWatch
from melissa_trainer.client.asking import Asking
from melissa_trainer.client.client_close import ClosingClient
from melissa_trainer.client.config import (
    check_simulation_id,
    rendezvous_dir,
    replay_bytes_for,
    resolve_receivers,
    resolve_run_id,
)
from melissa_trainer.client.env_names import warn_unknown_once
from melissa_trainer.client.field_part import FieldPart
from melissa_trainer.client.finite_check import FiniteCheck
from melissa_trainer.client.handshake_words import ARGUMENT, ENV, RENDEZVOUS
from melissa_trainer.client.held import HeldArrays
from melissa_trainer.client.launched_env import check_launched
from melissa_trainer.client.parameters import check_parameters
from melissa_trainer.client.restart import RestartCheck
from melissa_trainer.client.transport import Transport
from melissa_trainer.client.tuning import ClientTuning, check_field_sizes, named_keywords
from melissa_trainer.common.checks import check_seconds
from melissa_trainer.wire import FieldSpec, field_specs

if TYPE_CHECKING:
    from melissa_trainer.client.following import Following
    from melissa_trainer.client.predict_errors import Predicted

__all__ = ["Client"]


@named_keywords
class Client(ClosingClient):
    """Streams the fields of one simulation (or of one rank of an MPI simulation).

    Use it as a context manager, or call `close()` at the end: only `close` sends BYE
    and makes sure that the queued messages are delivered. Not thread-safe: one client
    is used by one thread; in a child forked after it was made, its `send`, `flush`,
    `predict` and `close` raise RuntimeError (ZeroMQ sockets do not survive a fork).

    Args:
        fields: the fields sent at every time step, `{name: (global shape, dtype)}` or
            a sequence of `protocol.FieldSpec`. Names: 1 to 255 UTF-8 bytes, not one of
            `RESERVED_NAMES`; shape: at most 8 positive dimensions (`()` for a scalar);
            dtype: one of `protocol.DTYPES` (native or little-endian byte order).
        parameters: the simulation's input parameters (`{name: float}`, finite values);
            the trainer's samples carry them in this order. Default: the JSON object in
            `$MELISSA_TRAINER_PARAMETERS` (set by the launcher), else none.
        simulation_id: unique in the study, 0 <= id < 2**64; default
            `$MELISSA_TRAINER_SIMULATION_ID`.
        endpoints: receiver endpoints in training-rank order (a list, or one
            comma-separated string); default `$MELISSA_TRAINER_ENDPOINTS`, else the
            directory `$MELISSA_TRAINER_RENDEZVOUS` (see `fetch_rendezvous`), whose
            CURVE keys the client then uses. Endpoints given here or by
            `$MELISSA_TRAINER_ENDPOINTS` take the receivers' CURVE public key from
            `curve_server_key`, else `$MELISSA_TRAINER_KEY` (unset: no CURVE; not 40 Z85
            characters: ValueError).
        comm: an mpi4py communicator: each rank then sends its own part of each field
            (see `send`); `None` for a simulation that sends whole fields.
        send_timeout: the longest, in seconds, one `send` may block on back-pressure
            before raising `TimeoutError`; `None` (or ``math.inf``) waits for as long as
            it takes while the receivers are connected (a receiver disconnected for
            `ClientTuning.disconnected_timeout` ends the wait, whatever this is).
        array_reuse: when the caller writes again into an array of more than
            `INLINE_MAX_BYTES` that it sent (such arrays leave without a copy):
            ``"immediate"`` (default): `send` returns once ZeroMQ is done with them.
            ``"next_send"``: the next `send` (or `flush`, `close`) waits for them, as a
            non-blocking MPI send completed by the next; for double buffering (step t+1
            written into the array of step t-1), the transfer then overlaps the next
            step's computation. ``"never"``: a code that computes a new array every step
            hands each one over; `send` does not wait for it (only to keep at most
            `HELD_BYTES_MAX` of earlier steps' arrays queued), and makes it read-only, so
            that a write by mistake raises instead of changing a message in flight.
            See `melissa_trainer.client.held`.
        tuning: how the client sends (high-water mark, batching, message bound, socket
            options, rendezvous and close timeouts): see `ClientTuning`.
        context: a ZeroMQ context to use; by default the client creates one and
            terminates it on `close`. One context shared by the clients of a worker's
            simulations saves each its making and ending; `close` then waits until
            ZeroMQ has sent the BYE (not the context's end) to know all left.
        run_id: the run this simulation belongs to, sent in the HELLO (a receiver of
            another run refuses it); default `$MELISSA_TRAINER_RUN_ID` (the launcher
            sets it), else the run id the rendezvous published, else none.
        curve_server_key: the receivers' CURVE public key (Z85, 40 characters; str or
            the bytes of `zmq.curve_keypair`) for the endpoints given here or by
            `$MELISSA_TRAINER_ENDPOINTS`: it takes precedence over
            `$MELISSA_TRAINER_KEY`. With a rendezvous, whose files publish the running
            trainer's key (a restarted one's, when followed), it must be that key.
            Not Z85, or not the rendezvous' key: `ConfigError` naming it.

    Raises:
        ValueError: a bad field declaration, parameter, simulation id, endpoint,
            timeout, run id or CURVE key, or no endpoint configured.
        UnknownArgumentError: a keyword that is none of these (a `TypeError`) naming
            the closest ("did you mean 'fields'?"; `tuning.named_keywords`).
        ReceiverNotFound: (a `DeliveryFailed`, a TimeoutError) the rendezvous directory
            stayed incomplete for `rendezvous_timeout` s.
        RuntimeError: the rendezvous was published by another run than `run_id`
            (another trainer took over the output directory): nothing is sent.
    """

    def __init__(
        self,
        fields: Mapping[str, tuple[Any, Any]] | Sequence[FieldSpec],
        parameters: Mapping[str, float] | None = None,
        simulation_id: int | None = None,
        endpoints: str | Sequence[str] | None = None,
        comm: Any = None,
        send_timeout: float | None = None,
        *,
        array_reuse: str = "immediate",
        tuning: ClientTuning | None = None,
        context: zmq.Context | None = None,
        run_id: str | None = None,
        curve_server_key: str | bytes | None = None,
    ) -> None:
        self._closed = True  # until fully constructed: close() is then a no-op
        tuning = ClientTuning() if tuning is None else tuning
        if comm is None:
            self.rank, self.ranks = 0, 1
        else:
            self.rank, self.ranks = int(comm.Get_rank()), int(comm.Get_size())
        # a misspelt MELISSA_TRAINER_* variable, named on rank 0 (`env_names`)
        warn_unknown_once(self.rank)
        if not isinstance(tuning, ClientTuning):
            raise ValueError(f"tuning must be a ClientTuning, not {tuning!r}")
        held = HeldArrays(array_reuse)  # (checks the mode)
        specs = field_specs(fields)
        check_field_sizes(specs, tuning.max_message_bytes)
        self.parameters = check_parameters(parameters)
        self.simulation_id = check_simulation_id(simulation_id)
        check_launched()  # (a launcher's variable mistyped: said now, not at a rerun)
        self._send_timeout = check_seconds("send_timeout", send_timeout)
        if self._send_timeout == math.inf:  # (no bound, as None: a lock takes no inf)
            self._send_timeout = None
        if self.ranks > protocol.MAX_CLIENT_RANKS:
            raise ValueError(
                f"{self.ranks} ranks: the protocol allows at most {protocol.MAX_CLIENT_RANKS}"
            )
        #: `routing`: where each step goes (`wire.routing`), kept when following a restart
        self.endpoints, curve_keys, published, self.routing = resolve_receivers(
            endpoints, tuning.rendezvous_timeout, self.simulation_id, curve_server_key
        )
        # (where the endpoints were read, if from a rendezvous: a trainer restarted
        # rewrites it, which a send or close that gives up then says, `restart`)
        rendezvous = None if endpoints is not None else rendezvous_dir()
        #: where the CURVE keys came from, which a refused handshake's words name
        self._key_from = (
            RENDEZVOUS if rendezvous else ARGUMENT if curve_server_key is not None else ENV
        )
        #: the run this simulation belongs to, sent in its HELLO (None: unchecked)
        self.run_id = resolve_run_id(run_id, published, self.simulation_id)
        self._specs = specs
        hello = self._hello()
        if len(hello) > protocol.PREFIX.size + protocol.HELLO_FIXED.size + protocol.MAX_HELLO_BYTES:
            raise ValueError(f"the HELLO is {len(hello)} bytes: too many fields or parameters")
        self.fields = specs
        self.tuning = tuning
        self._comm = comm
        self._fields = {spec.name: FieldPart(spec) for spec in specs}
        if comm is None:
            for f in self._fields.values():
                f.place(self.simulation_id, 0, 1, 0, f.spec.size)
        self._placed = comm is None
        self._asking = Asking(self.simulation_id)  # `predict`'s (its predictor)
        self._rendezvous, self._context, self._array_reuse = rendezvous, context, array_reuse
        self._finite = FiniteCheck(self.simulation_id, self.rank)
        #: the replay window and the follower of a restarted trainer (external mode:
        #: `following`), or None (`ClientTuning.replay_bytes` 0)
        self._following: Following | None = None
        window = replay_bytes_for(tuning, rendezvous, self.simulation_id)
        if window and rendezvous is not None:
            # imported here: a launched simulation (no window) does not pay its import
            # at start-up (`benchmarks/client_startup.py`)
            from melissa_trainer.client.following import Following

            self._following = Following.made_for(
                rendezvous, window, tuning.follow_timeout, self.simulation_id, self.rank,
                self.run_id, self.endpoints, tuning.disconnected_timeout,
            )  # fmt: skip
        #: the sockets and what they carry; the check of float fields before they leave
        #: with FLAG_FINITE, and its warning, goes with them
        self._transport = self._new_transport(curve_keys, held)
        self._fast = self._transport.fast_path(list(self._fields.values()), comm)
        self._closed = False
        #: malformed ADMISSION replies ignored at `close`, by reason (`admission`)
        self.admission_rejected: Counter[str] = Counter()
        try:
            self._transport.open(hello)
        except BaseException:
            self._closed = True
            raise
        self._watch = AdmissionWatch.after_hello(self)  # (a refusal, told at a send)
        forked.watch(self)  # (a forked child's use raises: `forked`)

    def _hello(self) -> bytes:
        return protocol.encode_hello(  # "python": worker mode is this client's (advice)
            self.simulation_id, self.rank, self.ranks, self._specs, self.parameters,
            self.run_id, "python", self.routing,
        )  # fmt: skip

    def _new_transport(self, curve_keys: list[str | None], held: HeldArrays) -> Transport:
        """A transport to `self.endpoints` (not opened)."""
        window = self._following.window.max_bytes if self._following is not None else 0
        check = RestartCheck(
            self._rendezvous, self.endpoints, self.run_id, self.simulation_id, window
        )
        transport = Transport(
            self.endpoints,
            self.tuning,
            curve_keys,
            self._context,
            held,
            self._finite,
            self._send_timeout,
            self.simulation_id,
            self.rank,
            self.ranks,
            check.note,
            self.routing,
            self._key_from,
        )
        seen = self._following.seen if self._following else None  # (follows at once)
        follow_in = self._rendezvous if self._following else None
        transport.wait.follows(check.stopped, follow_in, check.preempted, seen)
        transport.wait.all_taken = check.all_taken
        return transport

    def predict(self, inputs: Mapping[str, Any], timeout: float = 10.0) -> Predicted:
        """The trainer's current prediction for `inputs` and the model's version
        (``outputs, version = client.predict({"u": u}, timeout=0.5)``); see `client.predict`
        for where it asks and what it raises (`PredictionUnavailable`: `PredictTimeout` or
        `PredictRefused`, to fall back from). Not collective: with MPI, each rank asking sends
        whole inputs. Asked as the run this client sends to; with a replay window, a request
        after failed ones follows a restarted trainer first, as a `send` would (`asking`: why,
        and that it may then raise `follow.FollowError`). Once the client knows the trainer
        refused the simulation, raises its sends' `SimulationRefused` (`admission_watch`: why).
        """
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._refused is not None:  # (asks nothing: the study's model is not its)
            self._refuse()
        return self._asking.predict(
            inputs, timeout, self._following, self._follow, lambda: self.run_id,
            lambda: self._transport.context,
        )  # fmt: skip

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.steps_sent} steps sent"
        return (
            f"Client(simulation_id={self.simulation_id}, rank={self.rank}/{self.ranks}, "
            f"fields={[f.name for f in self.fields]}, endpoints={self.endpoints}, {state})"
        )
