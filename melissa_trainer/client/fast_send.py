"""The client's usual `send`, specialized once: small fields appended to their batches
(`fast_sender`), or large ones sent without a copy (`fast_large_sender`).

A 1 KB field costs about as much Python in `Client.send` as it does on the wire, and a
simulation's client shares the cores with the trainer's receiver, so every step the
usual send takes counts. `fast_sender` builds, when the client is created, a closure
that does that send with everything it needs bound as local names: the arrays exactly
as declared (no cast, no copy into C order), every field batched, sends less than
`batch_delay` apart, no deadline, no communicator. Anything else returns False, and
the client takes its general path, which checks everything and says what is wrong.
What is sent, and every decision taken, is exactly what the general path would do.
`fast_large_sender` does the same for a client whose fields all leave without a copy
(more than `INLINE_MAX_BYTES` each), whose general path cost the client's thread more
than twice the two raw pyzmq sends it makes (docs/measured.md, "Design choices,
measured").

Only the checks and the argument handling are specialized here (the check for NaN
and Inf too: `finite_check`, batches checked when they leave): records get into
batches through the outbox (`Outbox.step_appender`, `append_step` specialized by its
owner) and arrays leave through `HeldArrays.send`, the method the general path calls.

Thread-safety: as the client's (one thread); the outbox's lock guards the batches
against the flusher thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import zmq

from melissa_trainer.client.field_part import FieldPart
from melissa_trainer.client.finite_check import FiniteCheck
from melissa_trainer.client.held import HeldArrays
from melissa_trainer.client.outbox import Outbox
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import U64, U64_LIMIT

__all__ = ["FastSend", "Retry", "SendClock", "fast_large_sender", "fast_sender"]

_pack_step = U64.pack  # the time step, between a field's prebuilt header parts

#: ``fast(time_step, fields) -> bool``: True if the step was queued, False if the
#: caller must take the general path (nothing was done).
FastSend = Callable[[Any, Mapping[str, Any]], bool]

#: ``retry(attempt, first, step, index)``: the transport's wait of a call that ran out
#: of its slice (raised `first`), retried while the trainer is there (`send_wait`);
#: `index` is the socket the call sends on (None: a wait for arrays). Raises
#: `ReceiverGone` once a receiver is gone.
Retry = Callable[..., object]  # (`SendWait.retry`)


class SendClock:
    """When the client last sent (monotonic seconds), shared by both paths: sends
    further apart than `batch_delay` are not batched. And when a send next looks at the
    sockets' monitors (`look_at`; ``look(now, step)`` looks and says when next, or raises
    the trainer's stop for good: `send_wait.SendWait.look`), a comparison of the clock
    each path reads anyway."""

    __slots__ = ("last", "look", "look_at")

    def __init__(self, look: Callable[[float, int | None], float] | None = None) -> None:
        self.last = -float("inf")
        self.look_at = float("inf") if look is None else -float("inf")
        self.look: Callable[[float, int | None], float] = look or (lambda now, step: float("inf"))


_Check = tuple[str, np.dtype, tuple[int, ...], tuple[int, ...]]


def _checks(fields: Sequence[FieldPart]) -> tuple[_Check, ...]:
    """Name, dtype, shape and C strides of each field: what `_declared` compares."""
    return tuple((f.spec.name, f.spec.dtype, f.spec.shape, f.c_strides) for f in fields)


def _declared(checks: tuple[_Check, ...], given: Mapping[str, Any]) -> list[np.ndarray] | None:
    """The arrays of `given` in declared order if each is exactly as declared (an ndarray
    of the dtype, the shape and C order, no cast or copy needed), else None."""
    arrays = []
    for name, dtype, shape, strides in checks:
        v = given.get(name)
        if (
            type(v) is not np.ndarray
            or v.dtype is not dtype
            or v.shape != shape
            or v.strides != strides
        ):
            return None
        arrays.append(v)
    return arrays


def fast_sender(
    fields: Sequence[FieldPart],
    outbox: Outbox,
    steps: Sequence[StepSet],
    clock: SendClock,
    batch_delay: float,
    retry: Retry,
    shift: int = 0,
) -> FastSend:
    """The usual send of a client whose `fields` are all batched (see module doc).

    `steps[i]` records the steps sent to receiver i (step t goes to
    ``(t + shift) % len(steps)``: `Transport.shift`, the simulation's routing).
    A send of a batch blocked past a slice goes on through `retry` (no cost otherwise:
    the ``try`` of Python 3.11 costs nothing until it catches).
    """
    checks = _checks(fields)
    headers = tuple(f.batch_head for f in fields)
    n_fields, n_receivers = len(fields), len(steps)
    lock, append, send_group = outbox.lock, outbox.step_appender(headers), outbox.send
    monotonic = time.monotonic

    def fast(time_step: Any, given: Mapping[str, Any]) -> bool:
        if type(time_step) is not int or len(given) != n_fields or not 0 <= time_step < U64_LIMIT:
            return False
        payloads = _declared(checks, given)
        if payloads is None:
            return False
        now = monotonic()
        if now - clock.last >= batch_delay:
            return False  # a rare send: the general path sends it at once
        clock.last = now
        if now >= clock.look_at:
            clock.look_at = clock.look(now, time_step)
        index = (time_step + shift) % n_receivers
        with lock:
            if append(index, _pack_step(time_step), payloads, now):
                try:
                    send_group(index, None)
                except TimeoutError as exc:  # a slice ran out: on while the trainer is there
                    retry(partial(send_group, index, None), exc, time_step, index)
        steps[index].add(time_step)
        return True

    return fast


def fast_large_sender(
    fields: Sequence[FieldPart],
    sockets: Sequence[zmq.Socket],
    lock: Any,
    held: HeldArrays,
    steps: Sequence[StepSet],
    clock: SendClock,
    finite: FiniteCheck,
    retry: Retry,
    shift: int = 0,
) -> FastSend:
    """The usual send of a client whose `fields` all leave without a copy (module doc):
    per field a DATA header and the array's own memory (`HeldArrays.send`), waited for
    as `held.mode` says; `lock` is the sockets' (the client's). A float field that
    passes `finite`'s check goes with FLAG_FINITE, as on the general path. A send or
    wait blocked past a slice goes on through `retry`. Step t goes to socket
    ``(t + shift) % len(sockets)`` (`Transport.shift`)."""
    checks = _checks(fields)
    frames = tuple((f.head, f.head_finite, f.tail, f.checked, f.spec.name) for f in fields)
    passes = finite.passes
    n_fields, n_sockets = len(fields), len(sockets)
    send, after_send, monotonic = held.send, held.after_send, time.monotonic

    def fast(time_step: Any, given: Mapping[str, Any]) -> bool:
        if type(time_step) is not int or len(given) != n_fields or not 0 <= time_step < U64_LIMIT:
            return False
        arrays = _declared(checks, given)
        if arrays is None:
            return False
        clock.last = now = monotonic()
        if now >= clock.look_at:
            clock.look_at = clock.look(now, time_step)
        index = (time_step + shift) % n_sockets
        sock, step = sockets[index], _pack_step(time_step)
        with lock:
            for (head, head_finite, tail, checked, name), array in zip(frames, arrays, strict=True):
                if checked and passes(name, time_step, array):
                    head = head_finite
                frame = head + step + tail
                try:
                    send(sock, frame, array)
                except zmq.Again as exc:  # a slice ran out: on while the trainer is there
                    retry(partial(send, sock, frame, array), exc, time_step, index)
        try:
            after_send(n_fields, None)
        except zmq.NotDone as exc:
            retry(partial(after_send, n_fields, None), exc, time_step, None)
        steps[index].add(time_step)
        return True

    return fast
