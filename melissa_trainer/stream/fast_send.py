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
(more than `INLINE_MAX_BYTES` each): a 1 MiB field's send took 17-19 us of the client's
thread through the general path, against 7 us for the two raw pyzmq sends it makes.

Thread-safety: as the client's (one thread); the outbox's lock guards the batches
against the flusher thread.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import zmq

from melissa_trainer.stream.field_part import FieldPart
from melissa_trainer.stream.held import HeldArrays, Released
from melissa_trainer.stream.outbox import Outbox
from melissa_trainer.stream.step_set import StepSet

__all__ = ["FastSend", "SendClock", "fast_large_sender", "fast_sender"]

_U64 = 1 << 64
_pack_step = struct.Struct("<Q").pack

#: ``fast(time_step, fields) -> bool``: True if the step was queued, False if the
#: caller must take the general path (nothing was done).
FastSend = Callable[[Any, Mapping[str, Any]], bool]


class SendClock:
    """When the client last sent (monotonic seconds), shared by both paths: sends
    further apart than `batch_delay` are not batched."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = -float("inf")


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
) -> FastSend:
    """The usual send of a client whose `fields` are all batched (see module doc).

    `steps[i]` records the steps sent to receiver i (step t goes to t % len(steps)).
    """
    checks = _checks(fields)
    headers = tuple(f.batch_head for f in fields)
    n_fields, n_receivers = len(fields), len(steps)
    lock, groups, limit = outbox.lock, outbox.groups, outbox.limit
    append_step, send_group = outbox.append_step, outbox.send
    monotonic = time.monotonic

    def fast(time_step: Any, given: Mapping[str, Any]) -> bool:
        if type(time_step) is not int or len(given) != n_fields or not 0 <= time_step < _U64:
            return False
        payloads = _declared(checks, given)
        if payloads is None:
            return False
        now = monotonic()
        if now - clock.last >= batch_delay:
            return False  # a rare send: the general path sends it at once
        clock.last = now
        index = time_step % n_receivers
        step = _pack_step(time_step)
        with lock:
            group = groups[index]
            batch = group.batches.get(headers[0]) if n_fields == 1 else None
            if batch is not None and group.born:  # the usual case: one field, batch open
                buf = batch.buf
                buf += step
                buf += payloads[0].data
                batch.records += 1
                if len(buf) >= limit:
                    group.full = True
                due = group.full or now - group.born >= batch_delay
            else:
                due = append_step(index, headers, step, payloads, now)
            if due:
                send_group(index, None)
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
) -> FastSend:
    """The usual send of a client whose `fields` all leave without a copy (module doc):
    per field a DATA header, then the array's own memory (`Released` tracks it), held
    and waited for as `held.mode` says; `lock` is the sockets' (the client's)."""
    checks = _checks(fields)
    frames = tuple((f.head, f.tail, f.nbytes) for f in fields)
    n_fields, n_sockets = len(fields), len(sockets)
    never = held.mode == "never"
    hold, after_send = held.add, held.after_send
    monotonic, more = time.monotonic, zmq.SNDMORE

    def fast(time_step: Any, given: Mapping[str, Any]) -> bool:
        if type(time_step) is not int or len(given) != n_fields or not 0 <= time_step < _U64:
            return False
        arrays = _declared(checks, given)
        if arrays is None:
            return False
        clock.last = monotonic()
        index = time_step % n_sockets
        sock, step = sockets[index], _pack_step(time_step)
        with lock:
            for (head, tail, nbytes), array in zip(frames, arrays, strict=True):
                sock.send(head + step + tail, more)
                view = array.data  # a new memoryview: pyzmq alone keeps it after the send
                released = Released(view)
                sock.send(view, copy=False)
                del view  # (else this frame would keep it alive while `after_send` waits)
                hold(released, nbytes)
                if never:
                    array.flags.writeable = False  # the client's now: see array_reuse
        after_send(n_fields, None)
        steps[index].add(time_step)
        return True

    return fast
