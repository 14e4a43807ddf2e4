"""The client's outbox: small DATA messages coalesced into BATCH messages.

A ZeroMQ message costs a few microseconds of Python and library time at each end,
whatever its size: at 1 KB per field and time step that, not the bytes, bounds the
stream. So a client appends each small (INLINE) payload to a per-(receiver, field)
batch; the batches bound for one receiver are sent together, as the frames of one
ZeroMQ message (so the fields of a time step arrive together and the receiver
completes its samples at once), when one of them holds `batch_bytes`, when the
oldest record is `batch_delay` seconds old, or on `flush`/`close`. A client that
sends rarely (less often than every `batch_delay`) sends plain DATA at once (after
what its batches for that receiver still hold: a client's steps arrive in the order
sent), and a background thread sends batches that got old while the simulation computes, so no
record waits much longer than `batch_delay`. A batch of float payloads is checked
for NaN and Inf as a whole when it leaves, and carries FLAG_FINITE if it passed
(`finite_check`; one record that fails leaves the whole batch unflagged: the
receiver then checks each record).

Thread-safety: the client's thread and the flusher thread share the sockets, and
every use of them happens under `lock` (ZeroMQ sockets may change threads with a
memory barrier in between; the lock is one). The flusher never blocks on a socket
(it retries later), so `close` can always take the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client.finite_check import FiniteCheck, checked_dtype
from melissa_trainer.client.held import Released
from melissa_trainer.client.sockets import arm
from melissa_trainer.stream.finite import all_finite
from melissa_trainer.wire import FLAG_FINITE, FLAGS_AT, NAME_LEN_AT, U64

_pack_count_into = U64.pack_into  # the record count, at protocol.RECORDS_AT
_unpack_u64 = U64.unpack_from


#: ``append(index, step, payloads, now) -> due``: `Outbox.step_appender`'s result.
StepAppender = Callable[[int, bytes, Sequence[np.ndarray], float], bool]


class _Batch:
    """One field's records bound for one receiver (header first, count patched)."""

    __slots__ = ("buf", "header_bytes", "records", "stride", "dtype")

    def __init__(self, header: bytes, stride: int, dtype: np.dtype) -> None:
        self.buf = bytearray(header)
        self.header_bytes = len(header)
        self.records = 0
        self.stride = stride  # bytes per record: the u64 time step and the payload
        #: the payloads' dtype if they are checked for NaN and Inf, else None
        self.dtype = dtype if checked_dtype(dtype) else None

    def finite(self, check: FiniteCheck) -> bool:
        """Whether every record's payload is finite (False for an unchecked dtype; a
        record that is not makes `check` warn, naming its time step)."""
        dtype = self.dtype
        if dtype is None:
            return False
        rows = np.ndarray(  # (records, elements), a view of the buffer's payloads
            (self.records, (self.stride - U64.size) // dtype.itemsize),
            dtype,
            self.buf,
            self.header_bytes + U64.size,
            (self.stride, dtype.itemsize),
        )
        if all_finite(rows):  # one check for the batch (of a copy: rows are strided)
            return True
        end = self.header_bytes  # (rare: a batch holding NaN) the name ends the header
        name = bytes(self.buf[end - self.buf[NAME_LEN_AT] : end]).decode()
        for i in range(self.records):
            if not all_finite(rows[i]):
                at = self.header_bytes + i * self.stride
                check.nonfinite(name, _unpack_u64(self.buf, at)[0])
                break
        return False


class _Group:
    """The batches of every field bound for one receiver; sent together."""

    __slots__ = ("batches", "born", "full")

    def __init__(self) -> None:
        self.batches: dict[bytes, _Batch] = {}
        self.born = 0.0  # when its oldest record was added
        self.full = False  # a batch reached batch_bytes

    @property
    def empty(self) -> bool:
        return not self.born


class Outbox:
    """Per-(receiver, field) batches of one client (see the module docstring).

    Args:
        sockets: the client's PUSH sockets, in receiver order.
        batch_bytes: a group is sent once one of its batches holds this many bytes.
        batch_delay: seconds a record may wait (the flusher's period too).
        finite: the client's check for NaN and Inf: a batch of float payloads that
            passes it, as a whole when it leaves, goes with FLAG_FINITE.

    All methods but `close` are called with `lock` held (`lock` is the client's lock
    of its sockets too). `append_step` is the one way records get in, for the client's
    general and fast paths alike.
    """

    def __init__(
        self,
        sockets: Sequence[zmq.Socket],
        batch_bytes: int,
        batch_delay: float,
        finite: FiniteCheck,
    ) -> None:
        self.lock = threading.Lock()
        self._finite = finite
        self._sockets = sockets
        self._limit, self._delay = batch_bytes, batch_delay
        self._groups = [_Group() for _ in sockets]
        self._closing = threading.Event()
        self._flusher: threading.Thread | None = None
        self.messages_sent = 0
        #: the trackers of the batches sent that ZeroMQ may still hold, oldest first
        #: (`in_flight`: what a close sees leave, `delivery`)
        self._sent: list[Released] = []
        #: `_sent`'s length at which a send prunes it all (twice what a prune kept,
        #: + 64): a batch held on one socket keeps the front, and the other sockets'
        #: batches, done meanwhile, pile up behind it (amortised O(1) a send)
        self._prune_at = 64

    def mark(self, index: int) -> list[tuple[_Batch, int]]:
        """Where the batches bound for receiver `index` end now (for `rollback`)."""
        return [(b, len(b.buf)) for b in self._groups[index].batches.values()]

    def rollback(self, index: int, mark: list[tuple[_Batch, int]]) -> None:
        """Remove what was appended for receiver `index` since `mark` (a failed send)."""
        group = self._groups[index]
        kept = {id(b): n for b, n in mark}
        for batch in group.batches.values():
            end = kept.get(id(batch), batch.header_bytes)
            removed = len(batch.buf) - end
            if removed:
                batch.records -= removed // batch.stride
                del batch.buf[end:]
        if all(not b.records for b in group.batches.values()):
            group.born, group.full = 0.0, False

    def append_step(
        self,
        headers: Sequence[bytes],
        index: int,
        step: bytes,
        payloads: Sequence[np.ndarray],
        now: float,
    ) -> bool:
        """Add one time step's records for receiver `index`, one per field: `headers[i]`
        (the field's BATCH header) keys the batch of `payloads[i]`, a C-contiguous array;
        `step` is the packed u64 time step (`protocol.U64.pack`). Sends nothing; returns
        `due(index, now)`, so that the client's usual send costs one call here."""
        group = self._groups[index]
        batches, limit = group.batches, self._limit
        for header, payload in zip(headers, payloads, strict=True):
            batch = batches.get(header)
            if batch is None:
                stride = protocol.U64.size + payload.nbytes
                batch = batches[header] = _Batch(header, stride, payload.dtype)
                self._start_flusher()
            buf = batch.buf
            buf += step
            buf += payload.data
            batch.records += 1
            if len(buf) >= limit:
                group.full = True
        if not group.born:
            group.born = now
            return group.full
        return group.full or now - group.born >= self._delay

    def step_appender(self, headers: Sequence[bytes]) -> StepAppender:
        """`append_step` with `headers` bound, for the client's usual send: with one
        field whose batch is open (the usual case), the record is appended here without
        the general loop; anything else goes through `append_step`. Same effect, same
        contract (call it with `lock` held)."""
        headers = tuple(headers)
        append_step = self.append_step
        if len(headers) != 1:
            return partial(append_step, headers)
        header, groups, limit, delay = headers[0], self._groups, self._limit, self._delay

        def append_one(index: int, step: bytes, payloads: Sequence[np.ndarray], now: float) -> bool:
            group = groups[index]
            batch = group.batches.get(header)
            if batch is None or not group.born:
                return append_step(headers, index, step, payloads, now)
            buf = batch.buf
            buf += step
            buf += payloads[0].data
            batch.records += 1
            if len(buf) >= limit:
                group.full = True
            return group.full or now - group.born >= delay

        return append_one

    def due(self, index: int, now: float) -> bool:
        """True if the group bound for receiver `index` should be sent now."""
        group = self._groups[index]
        return group.full or (not group.empty and now - group.born >= self._delay)

    def send(self, index: int, deadline: float | None) -> None:
        """Send the group bound for receiver `index` as one multipart message.

        Raises TimeoutError (nothing sent, the group intact) if back-pressure outlasts
        `deadline`."""
        group = self._groups[index]
        frames = self._frames(group)
        if not frames:
            return
        sock = self._sockets[index]
        arm(sock, deadline)
        try:
            self._send_tracked(sock, frames, 0)
        except zmq.Again:
            raise TimeoutError("back-pressure") from None
        self._clear(group)

    def in_flight(self) -> int:
        """How many batches sent ZeroMQ still holds (call with `lock` held): a close
        that sees it fall sees the trainer take its messages (`delivery`). ZeroMQ copies
        nothing else it could count: a batch's release is the one sign that it left."""
        self._sent = [r for r in self._sent if not r.done]
        return len(self._sent)

    def _send_tracked(self, sock: zmq.Socket, frames: list[bytearray], flags: int) -> None:
        """Send `frames` as one message, its last frame a copy ZeroMQ holds without one
        more (pyzmq's copy of `send_multipart` costs the same), tracked (`in_flight`):
        the batches can be reused at once. Raises `zmq.Again` as the socket says."""
        for frame in frames[:-1]:  # (copied: the batches are reused)
            sock.send(frame, flags | zmq.SNDMORE)  # (once the first is in, all are: atomic)
        view = memoryview(bytes(frames[-1]))  # (a fresh object: its death is the release)
        released = Released(view)
        threshold = sock.copy_threshold
        sock.copy_threshold = 0  # (pyzmq would copy a frame under it: nothing to track)
        try:
            sock.send(view, flags, copy=False)
        finally:
            sock.copy_threshold = threshold
        del view
        sent = self._sent
        while sent and sent[0].done:  # (the front: the usual case, one socket)
            del sent[0]
        if len(sent) >= self._prune_at:
            sent[:] = [r for r in sent if not r.done]
            self._prune_at = 2 * len(sent) + 64
        sent.append(released)

    def flush(self, deadline: float | None) -> None:
        """Send every non-empty group."""
        for index in range(len(self._groups)):
            self.send(index, deadline)

    def close(self) -> None:
        """Stop the flusher thread (not holding `lock`); pending records stay for `flush`."""
        self._closing.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()

    # -- internals --------------------------------------------------------------------------

    def _frames(self, group: _Group) -> list[bytearray]:
        frames = []
        for batch in group.batches.values():
            if batch.records:
                buf = batch.buf
                _pack_count_into(buf, protocol.RECORDS_AT, batch.records)
                # FLAG_FINITE if every record passed the check (`finite_check`)
                if batch.finite(self._finite):
                    buf[FLAGS_AT] |= FLAG_FINITE
                else:
                    buf[FLAGS_AT] &= ~FLAG_FINITE & 0xFF
                frames.append(buf)
        return frames

    def _clear(self, group: _Group) -> None:
        for batch in group.batches.values():
            del batch.buf[batch.header_bytes :]
            batch.records = 0
        group.born, group.full = 0.0, False
        self.messages_sent += 1

    def _start_flusher(self) -> None:
        if self._flusher is None:
            self._flusher = threading.Thread(
                target=self._flush_old, name="melissa-client-flusher", daemon=True
            )
            self._flusher.start()

    def _flush_old(self) -> None:
        """Flusher thread: send groups older than `batch_delay`, never blocking."""
        while not self._closing.wait(self._delay / 2):
            if not self.lock.acquire(timeout=self._delay):
                continue  # the client is sending (or blocked on back-pressure)
            try:
                now = time.monotonic()
                for index, group in enumerate(self._groups):
                    if not self.due(index, now):
                        continue
                    try:
                        self._send_tracked(self._sockets[index], self._frames(group), zmq.NOBLOCK)
                    except zmq.Again:
                        continue  # back-pressure: the next round retries
                    self._clear(group)
            finally:
                self.lock.release()
