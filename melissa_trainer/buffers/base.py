"""The :class:`Buffer` contract: blocking, closing, watermark, rate limiting, checkpoints.

Policies (FIFO, FIRO, Reservoir) only say how samples are stored, chosen and evicted;
waiting, waking and counting live in `Buffer`. One :class:`threading.Lock` per buffer
with two conditions (``readable`` for consumers, ``writable`` for producers); every
public method takes the lock, so any method may be called from any thread. Nothing
busy-waits: a blocked ``put``/``get_batch`` sleeps on a condition and is woken only by
an event that can unblock it. A ``put`` that does not wait costs one lock, one append
and a counter.

`Buffer` is built from three parts, one concept each: ``_core.py`` (the state and the
policy hooks), ``_waiting.py`` (the slow paths of a ``put`` or a read that waits) and
``_snapshot.py`` (statistics and checkpoints); this module holds the public calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from melissa_trainer.common.checks import as_count

from ._common import BufferClosedError, Sample
from ._snapshot import SnapshotMixin
from ._waiting import WaitingMixin
from .block import SampleBlock
from .rate_limiter import RateLimiter

__all__ = ["Buffer"]


def _count(items: list[Any]) -> int:
    """Samples in a list of samples and blocks."""
    return sum(len(i) if type(i) is SampleBlock else 1 for i in items)


class Buffer(WaitingMixin, SnapshotMixin):
    """Thread-safe, bounded, blocking in-memory store of samples.

    Args:
        capacity: maximum number of samples held (``>= 1``); ``put`` blocks beyond it.
        watermark: ``get_batch(n)`` waits until at least ``max(n, watermark)`` samples
            are held, at every read (not only the first), until the buffer is closed.
        seed: seed of the buffer's ``numpy.random.Generator`` (random policies).
        rate_limiter: optional :class:`RateLimiter` holding reads and inserts to a
            sample-to-insert ratio. The buffer owns it from then on.
        retain: FIFO/FIRO only: keep every served sample in a retained list that
            :meth:`rewind` re-queues (pseudo-epochs). The retained list is *not*
            bounded by ``capacity``: it holds every sample served since the last
            rewind, so memory grows with the amount of data served.

    The constructor is `BufferCore.__init__` (``_core.py``).

    Blocking contract:
        * ``put`` blocks while the buffer is full (back-pressure) or the rate limiter
          holds inserts back; raises :class:`BufferClosedError` once closed.
        * ``get_batch(n)`` blocks until ``n`` samples can be returned. Once closed it
          never blocks: it returns up to ``n`` samples, then an empty read forever ("no
          data ever again", until a :meth:`rewind`). ``get_block(n)`` is the same read,
          as one :class:`SampleBlock`. End of stream is an empty read from both: ``[]``
          from ``get_batch``, an empty block from ``get_block``; test it with ``not
          batch`` (or ``len(batch) == 0``).
        * ``timeout`` is in seconds (``None`` waits forever, ``0`` polls); when it
          expires, ``TimeoutError`` is raised ("no data yet" / "still full").
    """

    # ------------------------------------------------------------------ properties
    @property
    def capacity(self) -> int:
        """Maximum number of samples held (a rewind may exceed it temporarily)."""
        return self._capacity

    @property
    def watermark(self) -> int:
        """Minimum number of held samples before a read is served (until closed)."""
        return self._watermark

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or restored from a closed snapshot)."""
        return self._closed

    @property
    def rate_limiter(self) -> RateLimiter | None:
        return self._limiter

    def __len__(self) -> int:
        """Number of samples currently held (a closed reservoir also counts the samples
        already drawn, which it serves again only after a :meth:`rewind`)."""
        with self._lock:
            return self._size()

    @property
    def replayable(self) -> int | None:
        """How many samples a :meth:`rewind` now would serve again (a FIFO/FIRO buffer's
        retained samples, none without ``retain``; a reservoir's contents); 0: a
        pseudo-epoch now would train on nothing; None: a buffer that does not say."""
        with self._lock:
            return self._replayable()

    def waiting(self) -> tuple[int, int]:
        """(puts, reads) blocked in this buffer now: calls inside `put` / `get_batch`
        that found no room (or too few samples, or the rate limiter against them) and
        registered as waiters, under the lock, before sleeping on its condition. A
        snapshot: a count seen here is a call that returns only when `close`, a read, a
        put or its timeout can unblock it (what tests of blocking wait for)."""
        with self._lock:
            return self._n_put_waiting, len(self._get_needs)

    def room(self) -> int | None:
        """How many samples `put_available` would take now, where the policy can say so
        cheaply; None where it cannot (this base, a rate limiter). A hint for a caller
        that would rather keep a block whole than split it (the receiver's pump): a
        snapshot, which a read or a put may change at once. Any thread."""
        return None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self._capacity}, watermark={self._watermark}, "
            f"size={len(self)}, closed={self._closed})"
        )

    # ------------------------------------------------------------------ producer side
    def put(self, sample: Sample, timeout: float | None = None) -> None:
        """Insert one sample, blocking while the buffer is full (back-pressure).

        The buffer stores a reference to ``sample`` (no copy); the caller must not
        modify its arrays afterwards.

        Args:
            sample: field name -> numpy array.
            timeout: seconds to wait for room; ``None`` waits forever.

        Raises:
            BufferClosedError: the buffer is (or becomes, while waiting) closed.
            TimeoutError: ``timeout`` expired while the buffer stayed full.
        """
        with self._lock:
            self._put_locked(sample, timeout)

    def _put_locked(self, sample: Sample, timeout: float | None) -> None:
        if self._closed:
            raise BufferClosedError("put() on a closed buffer (reception has ended)")
        lim = self._limiter
        if not self._has_room() or (
            lim is not None and not self._n_size_blocked and not lim.can_insert()
        ):
            self._wait_writable(timeout)
        self._add(sample)

    def _add(self, sample: Sample) -> None:
        """Insert one sample that may go in now, count it, wake readers (lock held)."""
        self._insert(sample, self._n_put)
        self._n_put += 1
        if self._limiter is not None:
            self._limiter.inserts += 1
        if self._size() >= self._wake_len:
            self._readable.notify_all()

    def put_available(self, samples: Sequence[Sample]) -> int:
        """Insert the longest prefix of `samples` that fits without waiting, under one
        lock acquisition; return how many were inserted (the caller `put`s the rest,
        blocking). Cheaper than one `put` per sample for a burst of small samples.
        `samples` may be a :class:`SampleBlock`: a FIFO holds it as one item, other
        policies hold its samples (each owning its memory).

        Raises:
            BufferClosedError: the buffer is closed.
        """
        with self._lock:
            if self._closed:
                raise BufferClosedError("put_available() on a closed buffer (reception has ended)")
            lim, insert, has_room = self._limiter, self._insert, self._has_room
            n = 0
            for sample in samples:
                if not has_room() or (
                    lim is not None and not self._n_size_blocked and not lim.can_insert()
                ):
                    break
                insert(sample, self._n_put)
                self._n_put += 1
                if lim is not None:
                    lim.inserts += 1
                n += 1
            if n and self._size() >= self._wake_len:
                self._readable.notify_all()
            return n

    def try_put(self, sample: Sample) -> bool:
        """Insert `sample` if that needs no wait; otherwise insert nothing, return False.

        For a producer that runs in the reader's thread (`IterableSource`): the buffer
        then serves it as it would a `put` blocked in a thread of its own. Until its
        next `try_put` (or `close`), a producer refused for lack of room counts as a put
        waiting for room, so the rate limiter does not hold reads back meanwhile (the
        liveness rule of the class docstring; without it a reservoir full of undrawn
        samples and a limiter waiting for inserts would wait for each other forever).
        At most one such producer per buffer. Non-blocking; thread-safe.

        Raises:
            BufferClosedError: the buffer is closed.
        """
        with self._lock:
            self._unpark()
            if self._closed:
                raise BufferClosedError("try_put() on a closed buffer (reception has ended)")
            lim = self._limiter
            if not self._has_room():
                self._parked = True
                self._n_room_blocked += 1
                return False
            if lim is not None and not self._n_size_blocked and not lim.can_insert():
                return False
            self._add(sample)
            return True

    def close(self) -> None:
        """End of reception: no more ``put``; reads drain what is left. Idempotent.

        Wakes every waiting ``put`` (which raises :class:`BufferClosedError`) and every
        waiting ``get_batch`` (which returns what is left, possibly ``[]``).
        """
        with self._lock:
            self._closed = True
            self._unpark()
            self._readable.notify_all()
            self._writable.notify_all()

    # ------------------------------------------------------------------ consumer side
    def get_batch(self, n: int, timeout: float | None = None) -> list[Sample]:
        """Return ``n`` samples, blocking until they are available.

        Before close, waits until ``len(self) >= max(n, watermark)`` and the rate
        limiter (if any) allows ``n`` more draws. After close, neither the watermark
        nor the limiter holds the read back: returns up to ``n`` samples, fewer at the
        very end, and ``[]`` when nothing is left to serve, meaning "no data ever
        again" (until a :meth:`rewind`): the end of the stream is an empty read, as for
        :meth:`get_block`.

        Args:
            n: batch size, ``1 <= n <= capacity``.
            timeout: seconds to wait; ``None`` waits forever.

        Raises:
            ValueError: ``n`` out of range.
            TimeoutError: ``timeout`` expired before the read could be served
                ("no data yet"; the stream is not over).
        """
        with self._lock:
            n = self._wait_to_get(n, timeout)
            batch = self._take_closed(n) if self._closed else self._take(n)
            if batch:
                self._count_got(len(batch))
            return batch

    def get_batch_or_block(
        self, n: int, timeout: float | None = None
    ) -> list[Sample] | SampleBlock:
        """:meth:`get_batch`'s read (the same draws, counters and end of the stream),
        for a reader that makes each sample only when it uses it: either `get_batch`'s
        list, or a :class:`SampleBlock` whose `SampleBlock.views` are exactly the
        samples `get_batch` would have returned (a buffer that stores by column: its
        batch is gathered anyway, and the per-sample dicts and views, made later by the
        reader and freed by it, are never kept with the batch). This one: `get_batch`.

        Raises:
            As :meth:`get_batch`.
        """
        return self.get_batch(n, timeout)

    def get_block(self, n: int, timeout: float | None = None) -> SampleBlock:
        """Like :meth:`get_batch`, but the `n` samples come as one :class:`SampleBlock`
        (one array per field, the samples along axis 0) that the caller owns. The end of
        the stream is an empty read, as for :meth:`get_batch`: here an empty block
        (`SampleBlock.empty`, ``len() == 0``, false), where `get_batch` gives ``[]``.

        A FIFO serves the blocks a receiver put without building per-sample objects;
        other policies stack the samples they draw (the same draws as `get_batch`).
        The arrays are copied outside the lock.

        Raises:
            ValueError: `n` out of range, or samples whose fields cannot be stacked
                (they have left the buffer, as they would have with a failed collate).
            TimeoutError: as :meth:`get_batch`.
        """
        blocks = self._stores_blocks
        with self._lock:
            n = self._wait_to_get(n, timeout)
            items = self._take_items_closed(n) if self._closed else self._take_items(n)
            if items:
                self._count_got(_count(items) if blocks else len(items))
        if not items:
            return SampleBlock.empty()
        # samples only (a policy that stores samples): stacked at once, as `join` would
        return SampleBlock.join(items) if blocks else SampleBlock.from_samples(items)

    #: whether a SampleBlock put is stored as one item (a FIFO's), which `_take_items`
    #: then returns; else as its samples, and `_take_items` returns samples only
    _stores_blocks: ClassVar[bool] = False

    def _take_items(self, n: int) -> list[Any]:
        """`_take`, as items (samples, or blocks of the buffer's own memory: then
        `_stores_blocks` is True)."""
        return self._take(n)

    def _take_items_closed(self, n: int) -> list[Any]:
        return self._take_closed(n)

    def _wait_to_get(self, n: int, timeout: float | None) -> int:
        """Check `n`; before close, wait until a read of `n` can be served (lock held)."""
        if type(n) is not int:
            n = as_count("batch size", n, 1)
        if not 1 <= n <= self._capacity:
            raise ValueError(
                f"batch size must be an integer in [1, capacity={self._capacity}], got {n!r}"
            )
        if not self._closed:
            lim = self._limiter
            need = n if n > self._watermark else self._watermark
            if self._size() < need or (
                lim is not None and not self._n_room_blocked and not lim.can_sample(n)
            ):
                self._wait_readable(n, need, timeout)
        return n

    def _count_got(self, count: int) -> None:
        self._n_got += count
        if self._limiter is not None:
            self._limiter.samples += count
        if self._n_put_waiting:
            self._writable.notify_all()

    # ------------------------------------------------------------------ pseudo-epochs
    def rewind(self) -> int:
        """Make the retained samples available again, each to be served once more.

        FIFO/FIRO need ``retain=True``; the samples served since the last rewind are
        re-queued after those still held (FIFO: in their original order), which may
        overfill the buffer temporarily (``put`` then blocks until ``len < capacity``).
        Reservoir: its current contents count as never drawn again. Works whether the
        buffer is closed or not.

        Returns:
            The number of samples made available again.
        """
        with self._lock:
            count = self._rewind()
            if count:
                self._readable.notify_all()
            return count
