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

What a pump could not put of a `SampleBlock` (a BATCH's samples) waits as one block,
not as per-sample dicts: a reservoir builds those when it takes them (`flush`), and a
FIFO takes the rest of the block as one item, so the usual steady state of a full
buffer (each pump puts part of a batch, the next one the rest) costs no Python per
sample here (issue 42). And a block that a pump receives while the buffer has room for
only part of it waits whole, untried, when the buffer can say so (`Buffer.room`: a
reservoir): the next pump's `flush` puts it, with one call where a put of what fits and
one of the rest would cost two (each `put_available` of a block has a fixed cost in the
buffer: the lock, the layout check, one scatter per field).

With an ingest transform (`IngestTransform`: the trainer's ``ingest_sample`` or
``ingest_block``), `put` and `put_many` transform what they are given first, once: what
waits in `overflow` is transformed already, and so is what reaches the buffer.

Thread-safety: used by one thread at a time (the receiver's ingest lock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from itertools import takewhile

from melissa_trainer.buffers import Buffer, BufferClosedError, Sample, SampleBlock
from melissa_trainer.sources.ingest_transform import IngestTransform

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
        transform: applied once to each sample or block given to `put` / `put_many`,
            before anything else (its `IngestTransformError` propagates: the receiver
            fails with it).

    `pumping` is set by the receiver while a pump ingests: puts then never block.
    """

    def __init__(
        self,
        buffer: Buffer,
        put_timeout: float,
        serve_requests: Callable[[], None],
        closed: Callable[[], bool],
        transform: IngestTransform | None = None,
    ) -> None:
        self._buffer, self._put_timeout = buffer, put_timeout
        self._transform = transform
        self._serve_requests, self._closed = serve_requests, closed
        #: ingested by a pump, not yet in the buffer: samples, and blocks kept whole
        self.overflow: deque[Sample | SampleBlock] = deque()
        self.pumping = False
        #: a put waits for room (read by other threads: `Receiver.backpressured`)
        self.waiting = False
        #: samples put into the buffer so far (read by the follow thread: `ingested`)
        self.put_count = 0

    def flush(self, block: bool) -> bool:
        """Put the samples a pump could not, in order (blocking for room if `block`);
        True once none is left."""
        overflow = self.overflow
        while overflow:
            head = overflow[0]
            # a kept block goes in as one (`Buffer.put_available`), loose samples as a run
            run = head if type(head) is SampleBlock else self._loose_run()
            try:
                n = self._buffer.put_available(run)
            except BufferClosedError:
                overflow.clear()
                return self._closed()
            self.put_count += n
            self._drop_front(run, n)
            if n < len(run):  # full
                if not block:
                    return False
                if not self._put_blocking(self._pop_one()):
                    overflow.clear()
                    return False
        return True

    def _loose_run(self) -> list[Sample]:
        """The samples at the front of `overflow`, up to its first block."""
        loose = takewhile(lambda item: type(item) is not SampleBlock, self.overflow)
        return list(loose)  # type: ignore[arg-type]

    def _drop_front(self, run: Sequence[Sample], n: int) -> None:
        """Remove the first `n` samples of `run` (the front of `overflow`) from it."""
        overflow = self.overflow
        if type(run) is SampleBlock:
            if n == len(run):
                overflow.popleft()
            elif n:
                overflow[0] = run[n:]  # (views of the same block)
        else:
            for _ in range(n):
                overflow.popleft()

    def _pop_one(self) -> Sample:
        """Take the first sample out of `overflow` (not empty)."""
        overflow = self.overflow
        head = overflow[0]
        if type(head) is not SampleBlock:
            return overflow.popleft()  # type: ignore[return-value]
        if len(head) == 1:
            overflow.popleft()
        else:
            overflow[0] = head[1:]
        return head[0]

    def put(self, sample: Sample) -> bool:
        """Put one sample (transformed first); False if the buffer is closed. Blocks
        while the buffer is full (serving requests), except during a pump, which keeps
        what does not fit."""
        transform = self._transform
        return self._put(sample if transform is None else transform.sample(sample))

    def _put(self, sample: Sample) -> bool:
        if self.overflow:  # keep the order: they go first
            self.overflow.append(sample)
            return True
        try:
            self._buffer.put(sample, 0.0)  # the usual case: room at once
            self.put_count += 1
            return True
        except TimeoutError:
            if self.pumping:
                self.overflow.append(sample)
                return True
        except BufferClosedError:
            return self._closed()
        return self._put_blocking(sample)

    def put_many(self, samples: Sequence[Sample]) -> int:
        """Put `samples` in order, transformed first (those that fit at once under one
        lock, the others like `put`; a `SampleBlock` goes in as one, see
        `Buffer.put_available`); returns how many were put or kept for later (fewer once
        the buffer closed)."""
        transform = self._transform
        if transform is not None:
            samples = transform.many(samples)
        n = 0
        if self.pumping and not self.overflow:
            # What does not fit whole waits whole: the next pump's `flush` puts it with one
            # call, where a put of what fits now and one of the rest then would cost the
            # buffer two (the steady state under back-pressure: each pump puts about one
            # BATCH, which the reader's draws rarely free room for exactly). A list waits
            # too, so that a block and its samples as a list reach the buffer alike.
            room = self._buffer.room()
            if room is not None and room < len(samples):
                if type(samples) is SampleBlock:
                    self.overflow.append(samples)
                else:
                    self.overflow.extend(samples)
                return len(samples)
        if not self.overflow:
            try:
                n = self._buffer.put_available(samples)
            except BufferClosedError:
                self._closed()
                return 0
            self.put_count += n
        if self.pumping:  # the buffer is full: what is left waits, in order
            if type(samples) is SampleBlock:
                if n < len(samples):
                    self.overflow.append(samples[n:])  # one item, not a dict per sample
            else:
                self.overflow.extend(samples[n:])
            return len(samples)
        for sample in samples[n:]:
            if not self._put(sample):
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
                    self.put_count += 1
                    return True
                except TimeoutError:
                    continue
                except BufferClosedError:
                    return self._closed()
        finally:
            self.waiting = False
