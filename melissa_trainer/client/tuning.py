"""How a client sends: `ClientTuning`, the knobs a simulation rarely changes (buffering,
batching, timeouts, the replay window, extra socket options), their defaults, and the
checks of what a tuning allows (the socket options the client owns, a field's size
against the receiver's bound). Each value is checked when the tuning is made, with an
error that names it and says how to fix it.

What the environment and the arguments tell a client (its simulation id, the receivers,
its parameters, whether the launcher started it) is `melissa_trainer.client.config`'s.
`named_keywords`: a misspelled keyword of `ClientTuning`
or `Client` names the closest valid one. Imports the standard library and pyzmq only
(through `wire`, `common.checks` and `config.reading`): no torch."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.common.checks import check_non_negative_int, check_seconds
from melissa_trainer.config.reading import UnknownArgumentError, unknown_key_problems
from melissa_trainer.wire import FieldSpec

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_DELAY",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_DISCONNECTED_TIMEOUT",
    "DEFAULT_FAILED_CLOSE_TIMEOUT",
    "DEFAULT_FOLLOW_TIMEOUT",
    "DEFAULT_REPLAY_BYTES",
    "DEFAULT_SNDHWM",
    "ClientTuning",
    "check_field_sizes",
    "check_socket_options",
    "named_keywords",
]

_Class = TypeVar("_Class", bound=type)

#: Default send high-water mark, in messages, of each socket.
DEFAULT_SNDHWM = 1000
#: Default bound on a BATCH message (small payloads are coalesced up to it).
DEFAULT_BATCH_BYTES = 65536
#: Default longest wait of a small payload in a batch, in seconds.
DEFAULT_BATCH_DELAY = 0.02
#: Default bound, in seconds, on each wait of `Client.close` *without progress* while the
#: trainer's connections are open: 30 minutes. Progress (messages leaving the queue, the
#: receipts' steps growing: `delivery`, `confirm`) counts it again, so a long bound costs
#: nothing with a trainer alive, however slow, and a trainer paused that long (SIGSTOP,
#: a suspended job, a long checkpoint) is waited for rather than losing the steps still
#: queued; a trainer stuck still ends the close after it. The C client's default too
#: (clients/c/include/melissa_trainer.h MT_DEFAULT_CLOSE_TIMEOUT; tests/c/
#: test_c_close_default.py keeps them equal).
DEFAULT_CLOSE_TIMEOUT = 1800.0
#: Default seconds a closing client waits for a receiver whose connection is lost.
DEFAULT_DISCONNECTED_TIMEOUT = 60.0
#: Default replay window of a client that follows its trainer (external mode), in bytes:
#: 64 MiB of copies of the last steps sent (`ClientTuning.replay_bytes`).
DEFAULT_REPLAY_BYTES = 64 << 20
#: Default seconds a client whose trainer is gone waits for a resumed one to publish.
DEFAULT_FOLLOW_TIMEOUT = 120.0
#: Default bound, in seconds, on `Client.close` after a failure (``close(bye=False)``, an
#: exception in the client's ``with`` block): the simulation is restarted anyway.
DEFAULT_FAILED_CLOSE_TIMEOUT = 10.0


def named_keywords(cls: _Class) -> _Class:
    """`cls`, whose ``__init__`` called with a keyword it does not take raises
    `UnknownArgumentError` naming the closest valid one ("unknown argument 'feilds':
    did you mean 'fields'?", `config.reading.unknown_key_problems`) where Python would
    raise its bare "unexpected keyword argument" (a `TypeError` too: code that catches
    Python's keeps working). The keywords checked are those of `cls`'s own ``__init__``
    (a subclass's ``super().__init__(...)`` is checked against them); one that takes
    ``**kwargs`` is left as it is. The signature `inspect` and `help` show is kept."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    params = list(inspect.signature(init).parameters.values())[1:]  # (not self)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return cls
    valid = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        if unknown := [key for key in kwargs if key not in valid]:
            problems = unknown_key_problems(unknown, valid, what="argument")
            raise UnknownArgumentError(problems, context=type(self).__name__)
        init(self, *args, **kwargs)

    cls.__init__ = checked  # type: ignore[misc]
    return cls


@named_keywords
@dataclass(frozen=True)
class ClientTuning:
    """How a `Client` sends: buffering, batching and timeouts. The defaults suit a
    simulation on the trainer's node or cluster; change one when a measurement says so.
    Checked when created (a `ValueError` names the field and the fix; a misspelled
    keyword, `UnknownArgumentError`, the closest field: `named_keywords`). A timeout of
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
        close_timeout: on `close`, the longest wait in seconds *without progress*
            for queued messages and the BYE to be delivered (progress: a message the
            sockets accepted, a frame ZeroMQ let go of, `melissa_trainer.client.
            delivery`; default 1800, `DEFAULT_CLOSE_TIMEOUT`: a trainer paused or busy
            that long, its connections open, is waited for), and at most
            `delivery.CLOSE_CAP_FACTOR` (10) times it in all; then, in external mode,
            for the receivers' receipts of the BYE: at most this long without
            progress (the steps they hold not growing), counted from the question and
            again from each progress (`melissa_trainer.client.confirm`); the cap in all
            counts from the close's start, one budget for both (a user's "10 x
            close_timeout in all"; a restarted trainer followed starts it again).
            `None` waits for as long as the receivers are there.
        disconnected_timeout: seconds a receiver may stay disconnected without a new
            connection (the trainer died, or its node) before `close`, or a `send`
            blocked on a full queue, gives up (default 60; a send raises
            `TimeoutError`); `None`: only `close_timeout`, or `send_timeout`, bounds
            the wait. A paused trainer keeps its connections and is waited for: see
            `melissa_trainer.client.patience` and `melissa_trainer.client.send_wait`.
            It bounds each TCP connect too (at least 2 s, ZMQ_CONNECT_TIMEOUT: a host
            that neither accepts nor refuses counts as disconnected since the client
            connected, not after the kernel's ~2 minutes; `sockets.connect_timeout_ms`).
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
