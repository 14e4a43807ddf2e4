"""The client's outbox: small DATA messages coalesced into BATCH messages.

A ZeroMQ message costs a few microseconds of Python and library time at each end,
whatever its size: at 1 KB per field and time step that, not the bytes, bounds the
stream. So a client appends each small (INLINE) payload to a per-(socket, field)
batch, and sends the batch as one BATCH message (see `docs/protocol.md`) when it
holds `batch_bytes`, when its oldest record is `batch_delay` seconds old, or on
`flush`/`close`. A client that sends rarely (less often than every `batch_delay`)
sends plain DATA at once, and a background thread flushes batches that got old while
the simulation computes, so no record waits much longer than `batch_delay`.

Thread-safety: the client's thread and the flusher thread share the sockets, and
every use of them happens under `lock` (ZeroMQ sockets may change threads with a
memory barrier in between; the lock is one). The flusher never blocks on a socket
(it retries later), so `close` can always take the lock.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import zmq

from melissa_trainer.stream import protocol

_COUNT = struct.Struct("<Q")
_COUNT_AT = protocol.PREFIX.size  # the record count sits where DATA has its time step

#: push(socket, frame, deadline): send one frame, honouring the deadline (may raise)
Push = Callable[[zmq.Socket, bytes | bytearray, float | None], None]


class _Batch:
    __slots__ = ("buf", "header_bytes", "records", "born")

    def __init__(self, header: bytes) -> None:
        self.buf = bytearray(header)
        self.header_bytes = len(header)
        self.records = 0
        self.born = 0.0


class Outbox:
    """Per-(socket, field) batches of one client (see the module docstring).

    Args:
        sockets: the client's PUSH sockets, in receiver order.
        batch_bytes: a batch is sent once it holds this many bytes.
        batch_delay: seconds a record may wait in a batch (the flusher's period too).
        push: how the client sends one frame with its deadline.
    """

    def __init__(
        self, sockets: Sequence[zmq.Socket], batch_bytes: int, batch_delay: float, push: Push
    ) -> None:
        self.lock = threading.Lock()
        self._sockets = sockets
        self._limit, self._delay, self._push = batch_bytes, batch_delay, push
        self._batches: dict[tuple[int, bytes], _Batch] = {}
        self._closing = threading.Event()
        self._flusher: threading.Thread | None = None
        self.batches_sent = 0

    def append(
        self,
        index: int,
        header: bytes,
        step: bytes,
        payload: np.ndarray,
        now: float,
        deadline: float | None,
    ) -> None:
        """Add one record (caller holds `lock`); sends the batch when it is full or old.

        `header` is the field's BATCH header for this client rank (its identity key);
        `step` the packed u64 time step."""
        key = (index, header)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch(header)
            self._start_flusher()
        if not batch.records:
            batch.born = now
        buf = batch.buf
        mark = len(buf)
        buf += step
        buf += payload.data
        batch.records += 1
        if len(buf) >= self._limit or now - batch.born >= self._delay:
            try:
                self._send(index, batch, deadline)
            except TimeoutError:  # the failed send queued nothing of this record
                del buf[mark:]
                batch.records -= 1
                raise

    def flush(self, deadline: float | None) -> None:
        """Send every non-empty batch (caller holds `lock`)."""
        for (index, _), batch in self._batches.items():
            if batch.records:
                self._send(index, batch, deadline)

    def close(self) -> None:
        """Stop the flusher thread (it holds no batch: pending ones stay for `flush`)."""
        self._closing.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()

    def _send(self, index: int, batch: _Batch, deadline: float | None) -> None:
        _COUNT.pack_into(batch.buf, _COUNT_AT, batch.records)
        self._push(self._sockets[index], batch.buf, deadline)  # copies the bytes
        del batch.buf[batch.header_bytes :]
        batch.records = 0
        self.batches_sent += 1

    def _start_flusher(self) -> None:
        if self._flusher is None:
            self._flusher = threading.Thread(
                target=self._flush_old, name="melissa-client-flusher", daemon=True
            )
            self._flusher.start()

    def _flush_old(self) -> None:
        """Flusher thread: send batches older than `batch_delay`, never blocking."""
        while not self._closing.wait(self._delay / 2):
            if not self.lock.acquire(timeout=self._delay):
                continue  # the client is sending (or blocked on back-pressure)
            try:
                now = time.monotonic()
                for (index, _), batch in self._batches.items():
                    if batch.records and now - batch.born >= self._delay:
                        try:
                            self._try_send(index, batch)
                        except zmq.Again:
                            break  # back-pressure: the next round retries
            finally:
                self.lock.release()

    def _try_send(self, index: int, batch: _Batch) -> None:
        _COUNT.pack_into(batch.buf, _COUNT_AT, batch.records)
        self._sockets[index].send(batch.buf, zmq.NOBLOCK)
        del batch.buf[batch.header_bytes :]
        batch.records = 0
        self.batches_sent += 1
