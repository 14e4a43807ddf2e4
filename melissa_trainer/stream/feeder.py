"""The receiver's puts: samples into the buffer, in order, with back-pressure.

Two kinds of caller ingest for a receiver (see :mod:`.ingest_loop`): its thread, which
may block while the buffer is full (that is the back-pressure that reaches the
clients), and a pump from the buffer's reader (`StreamSource.wait_for` in the training
thread), which must never block (it is the one thread that could make room). So a put
made during a pump that finds the buffer full keeps the sample in `overflow`, and every
later put goes behind it until `flush` has emptied it: samples reach the buffer in the
order they were ingested, whoever ingests. `overflow` is needed as long as the reader's
thread ingests: a message is decoded whole (a BATCH is many samples), so what does not
fit must wait somewhere, and the socket cannot take it back.

Thread-safety: used by one thread at a time (the receiver's ingest lock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from melissa_trainer.buffers import Buffer, BufferClosedError, Sample

__all__ = ["Feeder"]


class Feeder:
    """Puts samples into `buffer` for a receiver.

    Args:
        buffer: where samples go.
        put_timeout: seconds a blocked put waits between two calls of `serve_requests`.
        serve_requests: called while a put blocks (the receiver answers stop, finish and
            snapshot requests there; it may raise to abandon the put).
        closed: called when the buffer turns out closed (the reader ended the stream);
            its result (False) is what the put returns.

    `pumping` is set by the receiver while a pump ingests: puts then never block.
    """

    def __init__(
        self,
        buffer: Buffer,
        put_timeout: float,
        serve_requests: Callable[[], None],
        closed: Callable[[], bool],
    ) -> None:
        self._buffer, self._put_timeout = buffer, put_timeout
        self._serve_requests, self._closed = serve_requests, closed
        self.overflow: deque[Sample] = deque()  # ingested by a pump, not yet in the buffer
        self.pumping = False
        #: a put waits for room (read by other threads: `Receiver.backpressured`)
        self.waiting = False

    def flush(self, block: bool) -> bool:
        """Put the samples a pump could not (blocking for room if `block`); True once
        none is left."""
        overflow = self.overflow
        if not overflow:
            return True
        try:
            n = self._buffer.put_available(list(overflow))
        except BufferClosedError:
            overflow.clear()
            return self._closed()
        for _ in range(n):
            overflow.popleft()
        while overflow and block:
            if not self._put_blocking(overflow[0]):
                overflow.clear()
                return False
            overflow.popleft()
        return not overflow

    def put(self, sample: Sample) -> bool:
        """Put one sample; False if the buffer is closed. Blocks while the buffer is
        full (serving requests), except during a pump, which keeps what does not fit."""
        if self.overflow:  # keep the order: they go first
            self.overflow.append(sample)
            return True
        try:
            self._buffer.put(sample, 0.0)  # the usual case: room at once
            return True
        except TimeoutError:
            if self.pumping:
                self.overflow.append(sample)
                return True
        except BufferClosedError:
            return self._closed()
        return self._put_blocking(sample)

    def put_many(self, samples: Sequence[Sample]) -> int:
        """Put `samples` in order (those that fit at once under one lock, the others
        like `put`; a `SampleBlock` goes in as one, see `Buffer.put_available`);
        returns how many were put or kept for later (fewer once the buffer closed)."""
        n = 0
        if not self.overflow:
            try:
                n = self._buffer.put_available(samples)
            except BufferClosedError:
                self._closed()
                return 0
        if self.pumping:  # the buffer is full: what is left waits, in order
            self.overflow.extend(samples[n:])
            return len(samples)
        for sample in samples[n:]:
            if not self.put(sample):
                break
            n += 1
        return n

    def _put_blocking(self, sample: Sample) -> bool:
        put, serve_requests = self._buffer.put, self._serve_requests
        self.waiting = True
        try:
            while True:
                serve_requests()
                try:
                    put(sample, self._put_timeout)
                    return True
                except TimeoutError:
                    continue
                except BufferClosedError:
                    return self._closed()
        finally:
            self.waiting = False
