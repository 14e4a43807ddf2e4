"""What a client is told: by its arguments or the environment the launcher sets (its
simulation id, the receivers' endpoints, its parameters), and how it sends
(`ClientTuning`, the knobs a simulation rarely changes). Each value is checked here, with
an error that names it and says how to fix it. Imports the standard library, numpy and
pyzmq only (through `protocol` and `endpoints`): no torch."""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.common.checks import check_non_negative_int, check_seconds
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.wire import FieldSpec

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_DELAY",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_DISCONNECTED_TIMEOUT",
    "DEFAULT_FAILED_CLOSE_TIMEOUT",
    "DEFAULT_FOLLOW_TIMEOUT",
    "DEFAULT_REPLAY_BYTES",
    "ENV_REPLAY_BYTES",
    "launched",
    "replay_bytes_for",
    "DEFAULT_SNDHWM",
    "ENV_ENDPOINTS",
    "ENV_KEY",
    "ENV_PARAMETERS",
    "ENV_RENDEZVOUS",
    "ENV_RUN_ID",
    "ENV_SIMULATION_ID",
    "ClientTuning",
    "check_field_sizes",
    "check_socket_options",
    "Parameters",
    "UnknownParameterError",
    "check_parameters",
    "check_simulation_id",
    "check_time_step",
    "rendezvous_dir",
    "resolve_receivers",
    "resolve_run_id",
]

#: The simulation id (an unsigned 64-bit decimal integer).
ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
#: Comma-separated receiver endpoints, in training-rank order.
ENV_ENDPOINTS = "MELISSA_TRAINER_ENDPOINTS"
#: The receivers' CURVE public key (Z85, 40 characters; every rank binds with the stream's
#: one), for endpoints given by `ENV_ENDPOINTS` or ``endpoints=`` (a rendezvous
#: publishes its own): as `predict.ENV_SERVE_KEY` is for the serving endpoints.
ENV_KEY = "MELISSA_TRAINER_KEY"
#: A directory holding one `rank_{r}.json` per receiver (used when ENDPOINTS is unset).
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"
#: The simulation's parameters, a JSON object of name -> number (set by the launcher).
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
#: The run the simulation belongs to (set by the launcher to its trainer's run id).
ENV_RUN_ID = "MELISSA_TRAINER_RUN_ID"

#: Default send high-water mark, in messages, of each socket.
DEFAULT_SNDHWM = 1000
#: Default bound on a BATCH message (small payloads are coalesced up to it).
DEFAULT_BATCH_BYTES = 65536
#: Default longest wait of a small payload in a batch, in seconds.
DEFAULT_BATCH_DELAY = 0.02
#: Default bound, in seconds, on `Client.close` while the trainer's connections are open
#: (a paused trainer is waited for that long: 30 minutes).
DEFAULT_CLOSE_TIMEOUT = 1800.0
#: Default seconds a closing client waits for a receiver whose connection is lost.
DEFAULT_DISCONNECTED_TIMEOUT = 60.0
#: Default replay window of a client that follows its trainer (external mode), in bytes:
#: 64 MiB of copies of the last steps sent (`ClientTuning.replay_bytes`).
DEFAULT_REPLAY_BYTES = 64 << 20
#: Default seconds a client whose trainer is gone waits for a resumed one to publish.
DEFAULT_FOLLOW_TIMEOUT = 120.0
#: The replay window in bytes (`ClientTuning.replay_bytes`), overriding its default.
ENV_REPLAY_BYTES = "MELISSA_TRAINER_REPLAY_BYTES"
#: Set by the launcher for the simulations it starts (they are restarted by it, not followed).
ENV_ATTEMPT = "MELISSA_TRAINER_ATTEMPT"
#: Default bound, in seconds, on `Client.close` after a failure (``close(bye=False)``, an
#: exception in the client's ``with`` block): the simulation is restarted anyway.
DEFAULT_FAILED_CLOSE_TIMEOUT = 10.0


@dataclass(frozen=True)
class ClientTuning:
    """How a `Client` sends: buffering, batching and timeouts. The defaults suit a
    simulation on the trainer's node or cluster; change one when a measurement says so.
    Checked when created (a `ValueError` names the field and the fix). A timeout of
    ``math.inf`` is stored as None (no bound); a finite one past 24.8 days bounds each
    of ZeroMQ's waits at 24.8 days (its C int of milliseconds: `sockets.MAX_MS`).

    Attributes:
        sndhwm: send high-water mark of each socket, in messages: how many may queue
            before `send` blocks (back-pressure).
        batch_bytes: payloads of at most half this size are coalesced, per field and
            receiver, into BATCH messages of about this many bytes (a message costs
            microseconds whatever its size: batching is what makes 1 KB fields stream at
            hundreds of thousands per second). 0 sends every payload as its own DATA.
        batch_delay: the longest a payload waits in a batch, in seconds: a background
            thread sends batches that get older (while the simulation computes). A
            client whose sends are further apart than this does not batch.
        max_message_bytes: the receiver's bound on a field's size in bytes (checked by
            the client, so that a field the receiver would reject fails at once).
        socket_options: extra ZeroMQ socket options (``{zmq.SNDBUF: 1 << 20}``), set
            after the client's own, copied when the tuning is made. Those the client
            owns are refused (`check_socket_options`): SNDTIMEO (its 0.5 s slices
            find a trainer gone: use `send_timeout`), SNDHWM (use `sndhwm`), LINGER
            (`close` sets it from `close_timeout`), a RECONNECT_IVL below 1 ms and
            RECONNECT_STOP (both stop the reconnection a trainer's restart needs). A
            positive RECONNECT_IVL, RECONNECT_IVL_MAX, buffers, keep-alives and the
            like are kept as given.
        rendezvous_timeout: seconds to wait for the rendezvous directory to be complete.
        close_timeout: on `close`, the longest wait in seconds, in all, for queued
            messages and the BYE to be delivered (default 1800: a trainer paused or busy
            that long, its connections open, is waited for); `None` waits for as long as
            the receivers are there.
        disconnected_timeout: seconds a receiver may stay disconnected without a new
            connection (the trainer died, or its node) before `close`, or a `send`
            blocked on a full queue, gives up (default 60; a send raises
            `TimeoutError`); `None`: only `close_timeout`, or `send_timeout`, bounds
            the wait. A paused trainer keeps its connections and is waited for: see
            `melissa_trainer.client.patience` and `melissa_trainer.client.send_wait`.
        failed_close_timeout: on a `close` after a failure (``close(bye=False)``, an
            exception in the client's ``with`` block), the longest wait in seconds for
            what is queued (default 10: the launcher restarts the simulation, which
            sends its steps again); the lower of it and `close_timeout` bounds that
            wait, and a disconnected receiver is not waited for. `None`: only
            `close_timeout` bounds it.
        replay_bytes: the replay window, in bytes of copies of the last steps sent, that
            lets a client follow a trainer restarted from its checkpoint
            (`melissa_trainer.client.follow`: the client sends again what the checkpoint
            lacks); each `send` then copies its arrays (a cost: `benchmarks/ingest.py`).
            None (default): ``$MELISSA_TRAINER_REPLAY_BYTES`` if set, else
            `DEFAULT_REPLAY_BYTES` (64 MiB) in external mode (endpoints read from the
            rendezvous by a simulation the launcher did not start), else 0. 0: no
            window, no following (a restarted trainer fails the client, saying to run
            the simulation again). Size it to hold what the simulation sends between
            two of the trainer's checkpoints (``save_steps``), with room to spare.
        follow_timeout: seconds a client that keeps a replay window, finding its trainer
            gone, waits for a resumed trainer to publish in the rendezvous (default
            120); None: no bound.
    """

    sndhwm: int = DEFAULT_SNDHWM
    batch_bytes: int = DEFAULT_BATCH_BYTES
    batch_delay: float = DEFAULT_BATCH_DELAY
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    socket_options: Mapping[int, int] = field(default_factory=dict)
    rendezvous_timeout: float = 60.0
    close_timeout: float | None = DEFAULT_CLOSE_TIMEOUT
    disconnected_timeout: float | None = DEFAULT_DISCONNECTED_TIMEOUT
    failed_close_timeout: float | None = DEFAULT_FAILED_CLOSE_TIMEOUT
    replay_bytes: int | None = None
    follow_timeout: float | None = DEFAULT_FOLLOW_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("sndhwm", "batch_bytes", "max_message_bytes"):
            check_non_negative_int(f"ClientTuning.{name}", getattr(self, name))
        if self.batch_bytes > self.max_message_bytes:
            raise ValueError(
                f"ClientTuning.batch_bytes={self.batch_bytes} is more than max_message_bytes="
                f"{self.max_message_bytes}: lower it (0 disables batching)"
            )
        if not _is_number(self.batch_delay) or not self.batch_delay > 0:
            raise ValueError(
                f"ClientTuning.batch_delay must be > 0 seconds, not {self.batch_delay!r} "
                f"(batch_bytes=0 disables batching)"
            )
        if not isinstance(self.socket_options, Mapping):
            raise ValueError(
                f"ClientTuning.socket_options must be a mapping {{zmq option: value}}, not "
                f"{self.socket_options!r}"
            )
        # A copy: the mapping checked is the one `connect` applies, whatever the caller
        # does with theirs afterwards.
        object.__setattr__(self, "socket_options", dict(self.socket_options))
        check_socket_options(self.socket_options)
        check_seconds("ClientTuning.rendezvous_timeout", self.rendezvous_timeout, none=False)
        check_seconds("ClientTuning.close_timeout", self.close_timeout)
        check_seconds("ClientTuning.disconnected_timeout", self.disconnected_timeout)
        check_seconds("ClientTuning.failed_close_timeout", self.failed_close_timeout)
        check_seconds("ClientTuning.follow_timeout", self.follow_timeout)
        if self.replay_bytes is not None:
            check_non_negative_int("ClientTuning.replay_bytes", self.replay_bytes)
        for name in (
            "close_timeout",
            "disconnected_timeout",
            "failed_close_timeout",
            "follow_timeout",
        ):
            if getattr(self, name) == math.inf:  # +inf is "no bound": None, as documented
                object.__setattr__(self, name, None)


#: Socket options the client sets itself, and what to use instead.
_OWNED_OPTIONS = {
    "SNDTIMEO": "the client bounds each blocking call by 0.5 s to notice a trainer that is "
    "gone (ClientTuning.disconnected_timeout); bound a send with Client(send_timeout=...)",
    "SNDHWM": "use ClientTuning.sndhwm",
    "LINGER": "close sets it from the time left; use ClientTuning.close_timeout",
    "RECONNECT_STOP": "it stops the reconnection a client needs after a trainer restarts",
}


def replay_bytes_for(tuning: ClientTuning, rendezvous: str | None) -> int:
    """The replay window of a client (`ClientTuning.replay_bytes`): as set, else
    ``$MELISSA_TRAINER_REPLAY_BYTES``, else `DEFAULT_REPLAY_BYTES` when the endpoints
    came from `rendezvous` and the launcher did not start the simulation, else 0.

    Raises:
        ValueError: ``$MELISSA_TRAINER_REPLAY_BYTES`` is not a non-negative integer.
    """
    if tuning.replay_bytes is not None:
        return tuning.replay_bytes
    value = os.environ.get(ENV_REPLAY_BYTES, "").strip()
    if value:
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0:
            raise ValueError(f"{ENV_REPLAY_BYTES}={value!r} is not a number of bytes >= 0")
        return number
    if rendezvous is None or launched():
        return 0
    return DEFAULT_REPLAY_BYTES


def launched() -> bool:
    """Whether the launcher started this simulation (``$MELISSA_TRAINER_ATTEMPT`` set):
    the launcher restarts it and the study records its refusal, so it neither keeps a
    replay window nor asks for its admission at close (external mode does both)."""
    return bool(os.environ.get(ENV_ATTEMPT, "").strip())


def check_socket_options(options: Mapping[int, int]) -> None:
    """ValueError naming the first option of `options` the client relies on having its
    own way (`_OWNED_OPTIONS`), or a RECONNECT_IVL below 1 ms: libzmq does not reconnect
    at -1, nor at 0 (4.3.5), and a restarted trainer would never hear from the client
    again. Others are ZeroMQ's to judge (an unknown option fails at connect)."""
    for name, fix in _OWNED_OPTIONS.items():
        number = getattr(zmq, name, None)
        if number is not None and number in options:
            raise ValueError(
                f"ClientTuning.socket_options sets zmq.{name}, which the client sets itself: {fix}"
            )
    ivl = options.get(zmq.RECONNECT_IVL)
    if ivl is not None and not (isinstance(ivl, int) and ivl >= 1):
        raise ValueError(
            f"ClientTuning.socket_options sets zmq.RECONNECT_IVL={ivl!r}: -1 and 0 stop "
            f"reconnection, which a client needs after its trainer restarts; give at "
            f"least 1 (ms), or leave it out (ZeroMQ's 100 ms)"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_field_sizes(specs: Sequence[FieldSpec], max_message_bytes: int) -> None:
    """ValueError if a declared field is bigger than the receiver accepts."""
    for spec in specs:
        nbytes = spec.size * spec.dtype.itemsize
        if nbytes > max_message_bytes:
            raise ValueError(
                f"field {spec.name!r} is {nbytes} bytes, more than max_message_bytes="
                f"{max_message_bytes}; raise ClientTuning.max_message_bytes here and the "
                f"receiver's bound"
            )


def resolve_receivers(
    endpoints: str | Sequence[str] | None, rendezvous_timeout: float
) -> tuple[list[str], list[str | None], str | None]:
    """The receiver endpoints, the CURVE server key of each (None: no CURVE) and the
    run id they published (None: not read from a rendezvous, or an older trainer):
    `endpoints` (a list, or one comma-separated string), else
    `$MELISSA_TRAINER_ENDPOINTS`, both with the key in `$MELISSA_TRAINER_KEY` (unset or
    blank: no CURVE), else those published in `$MELISSA_TRAINER_RENDEZVOUS` with their
    keys and run id (waiting up to `rendezvous_timeout` seconds for them;
    `$MELISSA_TRAINER_KEY` is not read then).

    Raises:
        ValueError: no endpoint, one not like ``tcp://HOST:PORT``, or a key in
            `$MELISSA_TRAINER_KEY` that is not 40 characters (a Z85 key): said before
            anything is sent, as the serving key's (`predict`).
    """
    if endpoints is None:
        value = os.environ.get(ENV_ENDPOINTS, "").strip()
        if value:
            endpoints = value
        elif os.environ.get(ENV_RENDEZVOUS, "").strip():
            entries = fetch_rendezvous(os.environ[ENV_RENDEZVOUS].strip(), rendezvous_timeout)
            keys = [e.get("curve_public_key") for e in entries]
            return [e["endpoint"] for e in entries], keys, entries[0].get("run_id")
        else:
            raise ValueError(
                f"no receiver endpoint: pass endpoints=, or set {ENV_ENDPOINTS} (comma-"
                f"separated, e.g. tcp://127.0.0.1:5555) or {ENV_RENDEZVOUS} (the trainer's "
                f"rendezvous directory, {{output_dir}}/rendezvous)"
            )
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    out = [str(e).strip() for e in items]
    if not out or any("://" not in e for e in out):
        raise ValueError(f"endpoints must be like tcp://HOST:PORT, got {endpoints!r}")
    key = os.environ.get(ENV_KEY, "").strip() or None
    if key is not None and len(key) != 40:
        raise ValueError(
            f"the receivers' CURVE key ({ENV_KEY}) must be the 40-character Z85 public "
            f"key, not {key!r}"
        )
    return out, [key] * len(out), None


def rendezvous_dir() -> str | None:
    """The rendezvous directory `resolve_receivers` reads endpoints from when given
    none (`$MELISSA_TRAINER_RENDEZVOUS`, unless `$MELISSA_TRAINER_ENDPOINTS` is set),
    else None."""
    if os.environ.get(ENV_ENDPOINTS, "").strip():
        return None
    return os.environ.get(ENV_RENDEZVOUS, "").strip() or None


def resolve_run_id(run_id: str | None, published: str | None) -> str | None:
    """The run id the HELLO carries: `run_id`, else `$MELISSA_TRAINER_RUN_ID` (what the
    launcher says this simulation belongs to), else the one the rendezvous published,
    else None (no check: any receiver accepts the HELLO).

    Raises:
        ValueError: a malformed run id (named).
        RuntimeError: the rendezvous was published by another run than the one this
            simulation belongs to: another trainer has taken over the output directory
            (or the rendezvous is a stale copy); streaming there would mix two runs.
    """
    source = "run_id"
    if run_id is None and os.environ.get(ENV_RUN_ID, "").strip():
        run_id, source = os.environ[ENV_RUN_ID].strip(), ENV_RUN_ID
    if run_id is None:
        return published
    protocol.check_run_id(run_id, source)
    if published is not None and published != run_id:
        where = os.environ.get(ENV_RENDEZVOUS, "").strip()
        raise RuntimeError(
            f"the rendezvous directory {where!r} was published by run {published}, but this "
            f"simulation belongs to run {run_id} ({source}): another trainer has taken over "
            f"that output directory since this simulation was launched. Its data would go to "
            f"the wrong trainer: nothing is sent. Give each trainer its own --output_dir"
        )
    return run_id


def check_simulation_id(value: Any) -> int:
    """`value`, else `$MELISSA_TRAINER_SIMULATION_ID`, as a u64."""
    source = "simulation_id"
    if value is None:
        value = os.environ.get(ENV_SIMULATION_ID)
        source = ENV_SIMULATION_ID
        if value is None:
            raise ValueError(f"no simulation id: pass simulation_id=, or set {ENV_SIMULATION_ID}")
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{ENV_SIMULATION_ID}={value!r} is not an integer") from None
    return _u64(source, value)


def check_time_step(value: Any) -> int:
    """`value` as a u64 time step (any index-like integer)."""
    return _u64("time_step", value)


def _u64(name: str, value: Any) -> int:
    """`value` as an integer in [0, 2**64) (a u64 on the wire), or ValueError naming `name`."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {value!r}") from None
    if not 0 <= number < protocol.U64_LIMIT:
        raise ValueError(f"{name}={number} is out of range [0, 2**64)")
    return number


class UnknownParameterError(KeyError):
    """A simulation asked for a parameter it was not given; the message lists those it
    was given and where they come from (a `KeyError`, as a dict's missing key is)."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class Parameters(dict[str, float]):
    """A simulation's parameters (`Client.parameters`): a dict whose missing key is an
    `UnknownParameterError` naming the known parameters, not a bare ``KeyError``.

    Attributes:
        origin: where they came from (for the message).
    """

    def __init__(self, values: dict[str, float], origin: str) -> None:
        super().__init__(values)
        self.origin = origin

    def __missing__(self, key: str) -> float:
        if self:
            known = f"its parameters are {sorted(self)} ({self.origin})"
        else:
            known = (
                f"it has none: no {ENV_PARAMETERS} in its environment (a simulation started "
                f"by hand?); start it through the trainer's launcher, or give them: "
                f"{ENV_PARAMETERS}='{{\"{key}\": 0.5}}' or Client(parameters={{{key!r}: 0.5}})"
            )
        raise UnknownParameterError(f"this simulation has no parameter {key!r}: {known}")


def check_parameters(parameters: Mapping[str, float] | None) -> Parameters:
    """`parameters`, else the JSON object in `$MELISSA_TRAINER_PARAMETERS`, else none:
    string names, finite float values, in the given order."""
    origin = "given to the Client"
    if parameters is None and os.environ.get(ENV_PARAMETERS, "").strip():
        origin = f"from {ENV_PARAMETERS}, set by the launcher"
        try:
            parameters = json.loads(os.environ[ENV_PARAMETERS])
        except ValueError:
            raise ValueError(f"{ENV_PARAMETERS} is not valid JSON") from None
        if not isinstance(parameters, dict):
            raise ValueError(f"{ENV_PARAMETERS} must be a JSON object of name -> number")
    out: dict[str, float] = {}
    for key, value in (parameters or {}).items():
        if not isinstance(key, str):
            raise ValueError(f"parameter names must be strings, not {key!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {key!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"parameter {key!r}: {number} is not finite")
        out[key] = number
    return Parameters(out, origin)
