"""What a user sets about each rank's receiver (`ReceiverConfig`), validated in one
place, apart from its timing knobs (`ReceiverTuning`), whose defaults suit training.

`StreamSource(ReceiverConfig(...))` and `Receiver(buffer, rank, world_size,
ReceiverConfig(...))` take them; both are frozen, so one config may serve every rank
(`bind`'s explicit port is offset by the rank, see `StreamSource`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.common.checks import as_count
from melissa_trainer.config.reading import (
    UnknownArgumentError,
    unknown_key_problems,
)
from melissa_trainer.stream.nonfinite import check_policy
from melissa_trainer.stream.receiver_address import bind_fault, curve_keys
from melissa_trainer.stream.watchdog import check_stall_timeout
from melissa_trainer.wire import FieldSpec, field_specs

__all__ = ["DEFAULT_BIND", "STALL_TIMEOUT", "ReceiverConfig", "ReceiverTuning"]

#: loopback, a random port: binding another interface is explicit
DEFAULT_BIND = "tcp://127.0.0.1:*"
#: the default `ReceiverConfig.stall_timeout`, in seconds
STALL_TIMEOUT = 600.0


@dataclass(frozen=True)
class ReceiverConfig:
    """A rank's receiver, as its user sets it.

    Args:
        expected_simulations: the stream ends when this many simulations have finished
            (all their client ranks said BYE and all their time steps arrived) or were
            abandoned. None: only `finish()` ends it (under a `StreamSource` with a
            launcher: the launcher's `n_simulations`).
        bind: the ZeroMQ endpoint to bind (default: loopback, random port). Binding
            another interface is explicit; use CURVE keys there. Under a
            `StreamSource`, an explicit TCP port is offset by the rank
            (``tcp://h:5555`` -> rank r binds ``5555 + r``).
        rendezvous_dir: if given, ``rank_{rank}.json`` with the endpoint is written
            there (to a temporary file, then renamed), where clients find it
            (``MELISSA_TRAINER_RENDEZVOUS``). None: no file (under a trainer with a
            launcher, ``{output_dir}/rendezvous``); give clients the endpoints.
        advertise_host: host published instead of a wildcard bind address.
        fields: the study's schema, ``{name: (shape, dtype)}`` as the client declares
            it (or `FieldSpec`s); "first" (the default): the first accepted HELLO's
            (give it with several training ranks: each receiver would otherwise take
            the first HELLO *it* sees); None: each simulation declares its own. A
            simulation declaring other fields is refused at its HELLO, named with the
            difference, and counts as a failed attempt.
        parameters: the names of the parameters every simulation sends in its HELLO
            (in any order), in the order of every sample's ``parameters`` vector; a
            simulation sending others, or none (started by hand without them), is
            refused at its HELLO, named, with the fix. None (the default): under a
            `Study`, its sampler's names; otherwise no rule on the names (each
            simulation sends its own), the vector in the first simulation's order,
            and one listing the same names in another order refused
            (`stream.schema`).
        stall_timeout: seconds with the socket empty, while the stream has not ended,
            after which the receiver fails with an error naming the simulations it
            waits for (default 600; None: wait forever). Time blocked on a full
            buffer does not count. Raise it for solvers silent longer (a slow first
            step, jobs waiting in a batch queue).
        max_message_bytes: bound on a field's bytes (and one message, plus headers).
        rcvhwm: messages queued in the socket per connected client rank before it
            blocks (memory: up to ``rcvhwm`` + 2 messages per connection, see
            :mod:`.liveness`; lower it for large fields or many client ranks).
        max_pending, max_pending_bytes: bound on samples being reassembled (past it,
            the oldest is dropped and counted).
        max_time_step: DATA with a larger time step is rejected (bounds the bit arrays).
        curve_secret_key, curve_public_key: Z85 CURVE server keys (from
            ``zmq.curve_keypair()``; the public one is derived if omitted, and must
            be the secret one's pair if given: ValueError otherwise). Clients
            must then set ``curve_serverkey`` to the public key (also written to the
            rendezvous file). This encrypts and authenticates the server; any client
            that knows the public key may send.
        run_id: the run's identity (`protocol.check_run_id`: 1 to 64 letters, digits,
            ``-`` or ``_``), written into ``rank_{rank}.json``; a HELLO that carries
            another is refused (``wrong_run``: a simulation of another run, see
            docs/protocol.md); one without is accepted. None: no identity (no check).
            Under a trainer, its `run_id`.
        nonfinite: what a sample holding NaN or Inf in a floating-point field gets:
            "refuse" (the default: dropped, counted as ``nonfinite_refused`` and logged;
            its step counts as received), "accept" (no check: for data that holds NaN
            on purpose) or "fail" (dropped, and its simulation fails: a study's
            launcher kills it and counts a failed attempt, whichever rank received it,
            `nonfinite_handoff`; without a launcher, the stream fails). See
            `melissa_trainer.stream.nonfinite`.
        recycle_frames: on glibc, once a simulation declares a field of more than
            64 KiB (such fields stay in the frames they arrive in), let malloc keep
            the freed memory of those frames, up to what the buffer and the socket's
            queue may hold of them at once (64 MiB at least: glibc's own ceiling),
            instead of giving it back at each burst and faulting it in again
            (`melissa_trainer.stream.heap.recycle_frames`: process-wide, thresholds
            that only rise, never below where glibc's dynamic ones could settle, so
            the model's own blocks are not mapped anew each step). True by default;
            False leaves malloc as it is.

    Raises:
        ValueError: a value out of its range (named), a `bind` not shaped like an
            endpoint (`receiver_address.bind_fault`), a dtype name numpy does not know
            (with the closest of its names: "did you mean 'float32'?"), or malformed
            CURVE keys.
        UnknownArgumentError: a keyword that is no field (a `TypeError`, as Python's
            own, and a `ConfigError` suggesting the closest field: "did you mean
            'fields'?").
        RuntimeError: CURVE keys with a libzmq built without CURVE.
    """

    expected_simulations: int | None = None
    bind: str = DEFAULT_BIND
    rendezvous_dir: str | os.PathLike[str] | None = None
    advertise_host: str | None = None
    fields: Mapping[str, tuple[Any, Any]] | Sequence[FieldSpec] | str | None = "first"
    stall_timeout: float | None = STALL_TIMEOUT
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    rcvhwm: int = 1000
    max_pending: int = 4096
    max_pending_bytes: int = 2 << 30
    max_time_step: int = 1 << 24
    curve_secret_key: str | bytes | None = field(default=None, repr=False)  # a secret
    curve_public_key: str | bytes | None = None
    run_id: str | None = None
    nonfinite: str = "refuse"
    parameters: Sequence[str] | None = None
    recycle_frames: bool = True

    def __new__(cls, *args: Any, **kwargs: Any) -> ReceiverConfig:
        # Checked here, before the dataclass's __init__ would raise a bare TypeError
        # ("unexpected keyword argument 'feilds'"), as `TrainingArguments` does
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = [key for key in kwargs if key not in names]
        if unknown:
            problems = unknown_key_problems(unknown, names, what="argument")
            raise UnknownArgumentError(problems, context=cls.__name__)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        check_policy(self.nonfinite)  # raises, naming the field and the choices
        # checked here: ZeroMQ's bare "Invalid argument" came only when the receiver bound
        fault = bind_fault(self.bind)
        if fault is not None:
            raise ValueError(
                f"ReceiverConfig.bind must be {fault}; got {self.bind!r}: e.g. "
                f"{DEFAULT_BIND} (loopback, a random port) or tcp://*:5555 (every "
                "interface, rank r binds port 5555 + r)"
            )
        if not isinstance(self.recycle_frames, bool):
            raise ValueError(f"recycle_frames must be True or False, not {self.recycle_frames!r}")
        if self.expected_simulations is not None and self.expected_simulations < 0:
            raise ValueError(f"expected_simulations must be >= 0, got {self.expected_simulations}")
        if isinstance(self.fields, str) and self.fields != "first":
            raise ValueError(
                f"fields must be a mapping, FieldSpecs, 'first' or None, not {self.fields!r}"
            )
        if self.fields is not None and not isinstance(self.fields, str):
            field_specs(self.fields)  # raises on a malformed schema
        # frozen: the normalized value is set past the dataclass's guard
        object.__setattr__(self, "stall_timeout", check_stall_timeout(self.stall_timeout))
        for name, low in (
            ("max_message_bytes", 1),
            ("rcvhwm", 0),
            ("max_pending", 1),
            ("max_pending_bytes", 1),
            ("max_time_step", 0),
        ):
            as_count(name, getattr(self, name), low, numpy=False, floats=False)
        curve_keys(self.curve_secret_key, self.curve_public_key)  # raises if malformed
        if self.run_id is not None:
            protocol.check_run_id(self.run_id, "ReceiverConfig.run_id")
        if self.parameters is not None:
            if isinstance(self.parameters, str) or not all(
                isinstance(n, str) for n in self.parameters
            ):
                raise ValueError(
                    f"parameters must be a list of parameter names, not {self.parameters!r}"
                )
            object.__setattr__(self, "parameters", tuple(self.parameters))

    @property
    def schema(self) -> list[FieldSpec] | None:
        """The fields every simulation must declare, if given (not "first" nor None)."""
        return (
            None
            if self.fields is None or isinstance(self.fields, str)
            else field_specs(self.fields)
        )


@dataclass(frozen=True)
class ReceiverTuning:
    """The receiver's timing, in seconds; the defaults suit training.

    Args:
        put_timeout, poll_interval: seconds between checks of stop, finish and
            snapshot requests while blocked in ``buffer.put`` / waiting for a message
            (`state_dict` from another thread waits about that long).
        stop_timeout: how long `stop()` waits for the receiver thread.
        takeover: seconds without a pump from the reader after which the receiver's
            thread ingests again (validation, a checkpoint, a long step).
        pump_budget: the longest one pump ingests before the reader gets its batch.
        study_end_grace: seconds of silence, after rank 0's word that the study has
            ended, before the stream ends or fails on what it lacks (`study_end`).

    Raises:
        ValueError: a value that is not a positive finite number (named).
    """

    put_timeout: float = 0.1
    poll_interval: float = 0.1
    stop_timeout: float = 10.0
    takeover: float = 0.5
    pump_budget: float = 0.02
    study_end_grace: float = 2.0

    def __post_init__(self) -> None:
        names = ("put_timeout", "poll_interval", "stop_timeout", "takeover", "pump_budget")
        for name in (*names, "study_end_grace"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < math.inf):
                raise ValueError(f"ReceiverTuning.{name} must be > 0 seconds, got {value!r}")
