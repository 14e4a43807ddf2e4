"""The client API a simulation calls to stream its fields to the trainer.

```python
from melissa_trainer.client import Client

with Client(fields={"temperature": ((64, 64), "float32")}, parameters={"t0": 300.0}) as client:
    for t in range(steps):
        client.send(t, temperature=u)          # every declared field, each a numpy array
```

Imports only the standard library, numpy, pyzmq and the torch-free modules of
`melissa_trainer.stream` (protocol, outbox, endpoints, client_config, held,
field_part, step_set), and mpi4py
when a communicator is given: a simulation needs neither torch nor accelerate. The
wire format is specified in `docs/protocol.md`.

Semantics worth knowing (details in the docstrings of `Client` and `Client.send`):

* Configuration: `simulation_id` and `endpoints` default to the environment variables
  `MELISSA_TRAINER_SIMULATION_ID` and `MELISSA_TRAINER_ENDPOINTS` (or
  `MELISSA_TRAINER_RENDEZVOUS`, a directory the trainer's receivers publish to).
* Back-pressure: a send blocks while the trainer is slow (never drops); `send_timeout`
  bounds how long, after which `TimeoutError` is raised.
* Arrays above `INLINE_MAX_BYTES` are sent without a copy, and by default `send`
  returns only once ZeroMQ has released them, so the caller may overwrite its array as
  soon as `send` returns (`array_reuse` for double-buffered codes and for codes that
  compute a new array every step). Smaller ones are copied, into batches.
* A client object belongs to one thread (ZeroMQ sockets are not thread-safe).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, SupportsIndex

import numpy as np
import zmq

from melissa_trainer.stream import protocol
from melissa_trainer.stream.client_config import (
    ENV_ENDPOINTS,
    ENV_PARAMETERS,
    ENV_RENDEZVOUS,
    ENV_SIMULATION_ID,
    RESERVED_NAMES,
    check_parameters,
    check_simulation_id,
    check_time_step,
    field_specs,
    resolve_endpoints,
)
from melissa_trainer.stream.endpoints import fetch_endpoints
from melissa_trainer.stream.fast_send import FastSend, SendClock, fast_large_sender, fast_sender
from melissa_trainer.stream.field_part import INLINE_MAX_BYTES, FieldPart
from melissa_trainer.stream.held import ARRAY_REUSE_MODES, HELD_BYTES_MAX, HeldArrays, Released
from melissa_trainer.stream.outbox import Outbox
from melissa_trainer.stream.protocol import FieldSpec
from melissa_trainer.stream.send_arrays import place_parts, prepare_arrays
from melissa_trainer.stream.step_set import StepSet

__all__ = [
    "ARRAY_REUSE_MODES",
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_DELAY",
    "DEFAULT_SNDHWM",
    "ENV_ENDPOINTS",
    "ENV_PARAMETERS",
    "ENV_RENDEZVOUS",
    "ENV_SIMULATION_ID",
    "HELD_BYTES_MAX",
    "INLINE_MAX_BYTES",
    "RESERVED_NAMES",
    "Client",
    "FieldSpec",
    "fetch_endpoints",
]

logger = logging.getLogger(__name__)

#: Default send high-water mark, in messages, of each socket.
DEFAULT_SNDHWM = 1000
#: Default bound on a BATCH message (small payloads are coalesced up to it).
DEFAULT_BATCH_BYTES = 65536
#: Default longest wait of a small payload in a batch, in seconds.
DEFAULT_BATCH_DELAY = 0.02

_U64 = 1 << 64
_MAX_RANKS = 1 << 16  # client rank and count are u16 on the wire
_STEP = struct.Struct("<Q")


class Client:
    """Streams the fields of one simulation (or of one rank of an MPI simulation).

    Use it as a context manager, or call `close()` at the end: only `close` sends BYE
    and makes sure that the queued messages are delivered. Not thread-safe: one client
    is used by one thread.

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
            directory `$MELISSA_TRAINER_RENDEZVOUS` (see `fetch_endpoints`).
        comm: an mpi4py communicator: each rank then sends its own part of each field
            (see `send`); `None` for a simulation that sends whole fields.
        send_timeout: the longest, in seconds, one `send` may block on back-pressure
            before raising `TimeoutError`; `None` waits for as long as it takes.
        rendezvous_timeout: how long to wait for the rendezvous directory to be complete.
        close_timeout: on `close`, how long to wait for queued messages to be delivered
            (ZeroMQ's linger); `None` waits for as long as it takes.
        sndhwm: send high-water mark of each socket, in messages: how many may queue
            before `send` blocks.
        max_message_bytes: the receiver's bound on a field's size in bytes (checked here,
            so that a field the receiver would reject fails at once).
        socket_options: extra ZeroMQ socket options (`{zmq.SNDBUF: 1 << 20}`).
        batch_bytes: payloads of at most half this size are coalesced, per field and
            receiver, into BATCH messages of about this many bytes (a message costs
            microseconds whatever its size: batching is what makes 1 KB fields stream at
            hundreds of thousands per second). 0 sends every payload as its own DATA.
        batch_delay: the longest a payload waits in a batch, in seconds: a background
            thread sends batches that get older (while the simulation computes). A
            client whose sends are further apart than this does not batch.
        context: a ZeroMQ context to use; by default the client creates one and
            terminates it on `close`.
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
            See `melissa_trainer.stream.held`.

    Raises:
        ValueError: a bad field declaration, parameter, simulation id or endpoint, or
            no endpoint configured.
        TimeoutError: the rendezvous directory stayed incomplete.
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
        rendezvous_timeout: float = 60.0,
        close_timeout: float | None = 60.0,
        sndhwm: int = DEFAULT_SNDHWM,
        max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES,
        socket_options: Mapping[int, int] | None = None,
        context: zmq.Context | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        batch_delay: float = DEFAULT_BATCH_DELAY,
        array_reuse: str = "immediate",
    ) -> None:
        self._closed = True  # until fully constructed: close() is then a no-op
        if not isinstance(batch_bytes, int) or not 0 <= batch_bytes <= max_message_bytes:
            raise ValueError(
                f"batch_bytes must be an int in [0, max_message_bytes={max_message_bytes}], "
                f"not {batch_bytes!r} (0 disables batching)"
            )
        if not batch_delay > 0:
            raise ValueError(f"batch_delay must be > 0 seconds, not {batch_delay!r}")
        held = HeldArrays(array_reuse)  # (checks the mode)
        specs = field_specs(fields)
        for spec in specs:
            nbytes = spec.size * spec.dtype.itemsize
            if nbytes > max_message_bytes:
                raise ValueError(
                    f"field {spec.name!r} is {nbytes} bytes, more than max_message_bytes="
                    f"{max_message_bytes}; raise the bound on the client and the receiver"
                )
        self.parameters = check_parameters(parameters)
        self.simulation_id = check_simulation_id(simulation_id)
        if send_timeout is not None and not send_timeout >= 0:
            raise ValueError(f"send_timeout must be None or >= 0 seconds, not {send_timeout}")
        if close_timeout is not None and not close_timeout >= 0:
            raise ValueError(f"close_timeout must be None or >= 0 seconds, not {close_timeout}")
        if not isinstance(sndhwm, int) or sndhwm < 0:
            raise ValueError(f"sndhwm must be a non-negative int, not {sndhwm!r}")
        if comm is None:
            self.rank, self.ranks = 0, 1
        else:
            self.rank, self.ranks = int(comm.Get_rank()), int(comm.Get_size())
            if self.ranks > _MAX_RANKS:
                raise ValueError(f"{self.ranks} ranks: the protocol allows at most {_MAX_RANKS}")
        hello = protocol.encode_hello(
            self.simulation_id, self.rank, self.ranks, specs, self.parameters
        )
        if len(hello) > protocol.PREFIX.size + protocol.HELLO_FIXED.size + protocol.MAX_HELLO_BYTES:
            raise ValueError(f"the HELLO is {len(hello)} bytes: too many fields or parameters")
        self.endpoints = resolve_endpoints(endpoints, rendezvous_timeout)
        self.fields = specs
        self._comm = comm
        self._fields = {spec.name: FieldPart(spec) for spec in specs}
        if comm is None:
            for f in self._fields.values():
                f.place(self.simulation_id, 0, 1, 0, f.spec.size)
        self._placed = comm is None
        self._send_timeout = send_timeout
        self._close_timeout = close_timeout
        self._steps = [StepSet() for _ in self.endpoints]  # per receiver (for its BYE)
        self._held = held  # the large arrays ZeroMQ may still read

        self._own_context = context is None
        self._context = zmq.Context() if context is None else context
        self._sockets: list[zmq.Socket] = []
        try:
            for endpoint in self.endpoints:
                sock = self._context.socket(zmq.PUSH)
                self._sockets.append(sock)
                sock.setsockopt(zmq.SNDHWM, sndhwm)
                sock.setsockopt(zmq.LINGER, -1)
                sock.setsockopt(zmq.SNDTIMEO, -1)
                for option, value in (socket_options or {}).items():
                    sock.setsockopt(option, value)
                try:
                    sock.connect(endpoint)
                except zmq.ZMQError as exc:
                    raise ValueError(f"cannot connect to endpoint {endpoint!r}: {exc}") from None
        except BaseException:
            self._release(0)
            raise
        self._lock = threading.Lock()  # the sockets' user: this thread or the flusher
        self._outbox: Outbox | None = None
        if batch_bytes > 0:
            self._outbox = Outbox(self._sockets, batch_bytes, batch_delay)
            self._lock = self._outbox.lock
        self._batch_delay = batch_delay
        self._batch_record_max = batch_bytes // 2  # a bigger payload gains nothing in a batch
        self._clock = SendClock()  # when the last send was (both paths)
        self._fast = self._fast_path()
        self._closed = False
        try:
            deadline = self._deadline(send_timeout)
            for sock in self._sockets:
                self._push(sock, hello, deadline)
        except BaseException:
            self._closed = True
            self._release(0)
            raise

    # -- sending ----------------------------------------------------------------------

    @property
    def steps_sent(self) -> int:
        """How many distinct time steps this client has sent (to all receivers; the BYE
        to each receiver carries the number sent to it)."""
        return sum(steps.count for steps in self._steps)

    def send(
        self, time_step: SupportsIndex, arrays: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> None:
        """Send the fields of one time step: every declared field, each once.

        Fields are keyword arguments (`send(t, temperature=u)`) or a mapping
        (`send(t, {"temperature": u})`). Each is a numpy array of the declared dtype
        (no casting: a different dtype is an error; only the byte order is converted).
        Without `comm`, an array has the declared global shape. With `comm`, each rank
        passes its own contiguous part of the C-ordered flattened global field, of any
        shape (only its size matters); the first `send` is collective (all ranks call it,
        as SPMD codes do): it computes each rank's element offset by a scan over the
        ranks in rank order, and checks that the parts add up to the global size. A part's
        size must then stay the same; a rank whose part is empty sends no DATA for it.

        Non-C-contiguous arrays (a transposed or strided view) are copied into C order
        first. Arrays of more than `INLINE_MAX_BYTES` are sent without a copy, and by
        default this call returns once ZeroMQ has released them (see `array_reuse` for
        the other ways); smaller ones are copied (into a batch, see `batch_bytes`): the
        caller may modify them as soon as `send` returns.
        DATA of time step t goes to receiver `t % len(endpoints)`.

        Raises:
            ValueError: a missing or unknown field, a wrong shape or size, a bad time step.
            TypeError: an array of the wrong dtype.
            TimeoutError: back-pressure lasted longer than `send_timeout`. Fields already
                queued stay queued (they will be delivered if the trainer resumes), and
                an array of more than `INLINE_MAX_BYTES` may still be referenced by the
                queued message: do not modify it before `flush` returns (it waits until
                ZeroMQ has released it, as does the next `send` unless
                ``array_reuse="never"``).
            RuntimeError: the client is closed.
        """
        if self._closed:
            raise RuntimeError("the client is closed")
        fast = self._fast
        if fast is not None and arrays is None and fast(time_step, kwargs):
            return  # the usual send, specialized (see `fast_send`)
        given = kwargs
        if arrays:
            if kwargs and not arrays.keys().isdisjoint(kwargs):
                both = sorted(set(arrays) & set(kwargs))
                raise ValueError(f"fields {both} given both in the mapping and as keywords")
            given = {**arrays, **kwargs}
        prepared = self._place(time_step, given) if not self._placed else self._prepare(given)
        if type(time_step) is int and 0 <= time_step < _U64:
            step = time_step
        else:
            step = check_time_step(time_step)
        index = step % len(self._sockets)
        sock = self._sockets[index]
        step_bytes = _STEP.pack(step)
        deadline = self._deadline(self._send_timeout)
        now = time.monotonic()
        outbox = None if now - self._clock.last >= self._batch_delay else self._outbox
        self._clock.last = now
        queued = 0  # large arrays
        if not self._lock.acquire(timeout=-1 if self._send_timeout is None else self._send_timeout):
            raise self._timeout(step)
        # (only a bounded send can fail and need its records taken back)
        mark = None if outbox is None or deadline is None else outbox.mark(index)
        try:
            for f, arr in prepared:
                if f.local_size == 0:
                    continue
                if f.inline:
                    if outbox is not None and f.nbytes <= self._batch_record_max:  # coalesce
                        outbox.append(index, f.batch_head, step_bytes, arr, now)
                        continue
                    frame = b"".join((f.head, step_bytes, f.tail, arr.data))
                    if deadline is None:
                        sock.send(frame)  # a rare send, without a call more
                    else:
                        self._push(sock, frame, deadline)
                else:
                    tracker = self._push_two(sock, f.head + step_bytes + f.tail, arr, deadline)
                    self._held.add(tracker, arr.nbytes)
                    queued += 1
                    if self._held.mode == "never":
                        arr.flags.writeable = False  # the client's now: see array_reuse
            if outbox is not None and outbox.due(index, now):
                outbox.send(index, deadline)
        except TimeoutError:
            if outbox is not None and mark is not None:
                outbox.rollback(index, mark)  # this step's small fields were not queued
            raise self._timeout(step) from None  # (its large arrays queued stay held)
        finally:
            self._lock.release()
        try:
            self._held.after_send(queued, deadline)  # as array_reuse says
        except zmq.NotDone:
            raise self._timeout(step) from None
        self._steps[index].add(step)

    def flush(self) -> None:
        """Send the payloads waiting in batches now (see `batch_bytes`), and wait until
        ZeroMQ is done with every large array sent (see `array_reuse`); blocks on
        back-pressure like `send` (bounded by `send_timeout`)."""
        if self._closed:
            raise RuntimeError("the client is closed")
        deadline = self._deadline(self._send_timeout)
        if self._outbox is not None:
            timeout = -1 if self._send_timeout is None else self._send_timeout
            if not self._lock.acquire(timeout=timeout):
                raise self._timeout(None)
            try:
                self._outbox.flush(deadline)
            except TimeoutError:
                raise self._timeout(None) from None
            finally:
                self._lock.release()
        try:
            self._held.release_all(deadline)
        except zmq.NotDone:
            raise self._timeout(None) from None

    def _fast_path(self) -> FastSend | None:
        """The specialized usual send (see `fast_send`), or None if sends cannot take
        it: with a communicator (parts of any shape), a send timeout (a deadline and a
        rollback), or fields that are neither all batched nor all sent without a copy."""
        outbox = self._outbox
        if self._comm is not None or self._send_timeout is not None or not self._fields:
            return None
        fields = list(self._fields.values())
        if all(not f.inline for f in fields):
            return fast_large_sender(
                fields, self._sockets, self._lock, self._held, self._steps, self._clock
            )
        if outbox is None or not all(
            f.inline and 0 < f.nbytes <= self._batch_record_max for f in fields
        ):
            return None
        return fast_sender(fields, outbox, self._steps, self._clock, self._batch_delay)

    def _prepare(self, given: Mapping[str, Any]) -> list[tuple[FieldPart, np.ndarray]]:
        return prepare_arrays(self._fields, given, None if self._comm is None else self.rank)

    def _place(
        self, time_step: Any, given: Mapping[str, Any]
    ) -> list[tuple[FieldPart, np.ndarray]]:
        prepared = place_parts(
            self._fields, given, time_step, self._comm, self.simulation_id, self.rank, self.ranks
        )
        self._placed = True
        return prepared

    # -- ZeroMQ -----------------------------------------------------------------------

    @staticmethod
    def _deadline(timeout: float | None) -> float | None:
        return None if timeout is None else time.monotonic() + timeout

    def _arm(self, sock: zmq.Socket, deadline: float | None) -> None:
        if deadline is not None:
            sock.setsockopt(zmq.SNDTIMEO, max(0, int((deadline - time.monotonic()) * 1000)))

    def _push(self, sock: zmq.Socket, frame: bytes | bytearray, deadline: float | None) -> None:
        self._arm(sock, deadline)
        try:
            sock.send(frame)
        except zmq.Again:
            raise self._timeout(None) from None

    def _push_two(
        self, sock: zmq.Socket, header: bytes, payload: np.ndarray, deadline: float | None
    ) -> Released:
        self._arm(sock, deadline)
        try:
            sock.send(header, zmq.SNDMORE)
        except zmq.Again:
            raise self._timeout(None) from None
        # The high-water mark counts whole messages: once the first part is queued, the
        # second one is accepted at once (multi-part messages are atomic).
        view = payload.data  # a new memoryview: pyzmq alone keeps it after the send
        released = Released(view)
        try:
            sock.send(view, copy=False)
        except zmq.Again:  # pragma: no cover - only if the connection broke in between
            raise self._timeout(None) from None
        return released

    def _timeout(self, step: int | None) -> TimeoutError:
        what = "a message" if step is None else f"time step {step}"
        return TimeoutError(
            f"simulation {self.simulation_id} rank {self.rank}: could not send {what} within "
            f"send_timeout={self._send_timeout} s: the trainer is not receiving (back-pressure)"
        )

    # -- closing ----------------------------------------------------------------------

    def close(self, *, bye: bool = True) -> None:
        """Say BYE to every receiver, deliver what is queued, release the sockets.

        Waits at most `close_timeout` seconds in all. Idempotent.

        Args:
            bye: send BYE (the simulation finished); `False` after a failure, so that the
                trainer does not take the simulation for complete.

        Raises:
            TimeoutError: the BYE or queued messages could not be delivered in time (they
                are dropped; the sockets and context are released all the same).
        """
        if self._closed:
            return
        self._closed = True
        deadline = self._deadline(self._close_timeout)
        failure = None
        if self._outbox is not None:
            self._outbox.close()  # the flusher stops; what it held is sent here
            with self._lock:
                if deadline is None:
                    for sock in self._sockets:
                        sock.setsockopt(zmq.SNDTIMEO, -1)
                try:
                    self._outbox.flush(deadline)
                except TimeoutError:
                    failure = "batched data"
        if bye and failure is None:
            try:
                for sock, steps in zip(self._sockets, self._steps, strict=True):
                    if deadline is None:
                        sock.setsockopt(zmq.SNDTIMEO, -1)
                    else:
                        self._arm(sock, deadline)
                    sock.send(
                        protocol.encode_bye(self.simulation_id, self.rank, self.ranks, steps.count)
                    )
            except zmq.Again:
                failure = "BYE"
        try:  # (with a context of its own, terminating it would do; not with the caller's)
            self._held.release_all(deadline)
        except zmq.NotDone:
            failure = failure or "queued messages"
        if failure is None:
            linger = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        else:
            linger = 0
        started = time.monotonic()
        self._release(linger)
        # ZeroMQ drops what the linger period did not deliver, and says nothing; a
        # termination that took the whole period is the sign of it.
        elapsed = time.monotonic() - started
        if failure is None and self._own_context and linger > 0 and elapsed >= 0.95 * linger / 1000:
            failure = "queued messages"
        if failure is not None:
            message_text = (
                f"simulation {self.simulation_id} rank {self.rank}: {failure} not delivered "
                f"within close_timeout={self._close_timeout} s to {self.endpoints}"
            )
            if bye:
                raise TimeoutError(message_text)
            logger.warning(message_text)

    def _release(self, linger_ms: int) -> None:
        for sock in self._sockets:
            sock.close(linger=linger_ms)
        self._sockets = []
        if self._own_context:
            self._context.term()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # After an exception: deliver what was sent, but no BYE (the run did not finish),
        # and raise nothing that would hide the exception.
        if exc_type is None:
            self.close()
        else:
            try:
                self.close(bye=False)
            except Exception:  # pragma: no cover - close(bye=False) only logs
                logger.exception("closing the client after an error failed")

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.steps_sent} steps sent"
        return (
            f"Client(simulation_id={self.simulation_id}, rank={self.rank}/{self.ranks}, "
            f"fields={[f.name for f in self.fields]}, endpoints={self.endpoints}, {state})"
        )
