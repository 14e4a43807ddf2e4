"""Buffers that serve each sample exactly once: FIFO (in order) and FIRO (random order)."""

from __future__ import annotations

from collections import deque
from collections.abc import MutableSequence, Sequence
from typing import Any, ClassVar

import numpy as np

from . import _state
from ._common import BufferClosedError, Sample
from .base import Buffer
from .block import SampleBlock
from .rate_limiter import RateLimiter

__all__ = ["FIFOBuffer", "FIROBuffer"]


class _ServeOnceBuffer(Buffer):
    """Common part of FIFO and FIRO: the retained list, bookkeeping, checkpoints.

    Held items and the insert id of each item's first sample are kept in parallel
    containers (no per-sample tuple: fewer allocations and no garbage-collector work
    on the put path). An item is one sample, or (FIFO only) a :class:`SampleBlock` of
    consecutive samples stored as given: `_held` counts samples, not items.
    """

    def __init__(
        self,
        capacity: int,
        watermark: int = 1,
        *,
        seed: int = 0,
        rate_limiter: RateLimiter | None = None,
        retain: bool = False,
    ) -> None:
        super().__init__(capacity, watermark, seed=seed, rate_limiter=rate_limiter, retain=retain)
        self._samples = self._container()
        self._ids = self._container()
        self._held = 0
        self._blocks = 0  # SampleBlock items held (FIFO)
        self._kept: list[Sample | SampleBlock] = []  # retained items, in serving order
        self._kept_ids: list[int] = []
        self._kept_count = 0

    # held items and their first insert ids, in the order that determines future serving
    _samples: MutableSequence[Any]
    _ids: MutableSequence[int]
    #: the type of `_samples` and `_ids`, chosen by each policy
    _container: ClassVar[type[MutableSequence[Any]]]

    def _size(self) -> int:
        return self._held

    def _has_room(self) -> bool:
        return self._held < self._capacity

    def _insert(self, sample: Sample, insert_id: int) -> None:
        self._samples.append(sample)
        self._ids.append(insert_id)
        self._held += 1

    def put_available(self, samples: Sequence[Sample]) -> int:
        """Same contract as :meth:`Buffer.put_available`; without a rate limiter, one
        `extend` for what fits (a FIFO keeps a :class:`SampleBlock` as one item)."""
        if self._limiter is not None:
            return super().put_available(samples)
        with self._lock:
            if self._closed:
                raise BufferClosedError("put_available() on a closed buffer (reception has ended)")
            n = min(len(samples), self._capacity - self._held)
            if n <= 0:
                return 0
            if self._stores_blocks and type(samples) is SampleBlock:
                self._samples.append(samples[:n])
                self._ids.append(self._n_put)
                self._blocks += 1
            else:
                self._samples.extend(samples[:n])
                self._ids.extend(range(self._n_put, self._n_put + n))
            self._n_put += n
            self._held += n
            if self._held >= self._wake_len:
                self._readable.notify_all()
            return n

    def _served(self, items: list[Any], ids: list[int], count: int) -> None:
        """Bookkeeping for `count` samples leaving the buffer to be served, as `items`
        (samples or blocks) whose first insert ids are `ids`."""
        if count:
            if count == len(ids):  # one sample per item
                id_sum = sum(ids)
            else:
                id_sum = 0
                for item, first in zip(items, ids, strict=True):
                    m = len(item) if type(item) is SampleBlock else 1
                    id_sum += m * first + m * (m - 1) // 2
            self._age_sum += count * (self._n_put - 1) - id_sum
            self._record_leave(1, count)
            self._held -= count
            if self._retain:
                self._kept.extend(items)
                self._kept_ids.extend(ids)
                self._kept_count += count

    def _replayable(self) -> int:
        return self._kept_count if self._retain else 0

    def _rewind(self) -> int:
        if not self._retain:
            raise RuntimeError(
                f"{type(self).__name__}.rewind() needs retain=True: FIFO/FIRO buffers forget "
                "served samples unless asked to keep them"
            )
        count = self._kept_count
        self._samples.extend(self._kept)
        self._ids.extend(self._kept_ids)
        self._held += count
        self._blocks += sum(type(item) is SampleBlock for item in self._kept)
        self._kept, self._kept_ids, self._kept_count = [], [], 0
        return count

    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        held = _each_sample(self._samples, self._ids)
        for slot, (sample, _) in enumerate(held):
            _state.encode_sample(arrays, f"s{slot}", sample)
        kept = _each_sample(self._kept, self._kept_ids)
        for i, (sample, _) in enumerate(kept):
            _state.encode_sample(arrays, f"r{i}", sample)
        return {
            "insert_ids": [i for _, i in held],
            "retained_insert_ids": [i for _, i in kept],
        }

    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        ids = _state.int_list("insert_ids", meta.get("insert_ids"))
        kept_ids = _state.int_list("retained_insert_ids", meta.get("retained_insert_ids"))
        expected = {f"s{i}" for i in range(len(ids))} | {f"r{i}" for i in range(len(kept_ids))}
        unknown = set(samples) - expected
        if unknown:
            raise ValueError(f"malformed buffer state: unexpected samples {sorted(unknown)[:5]}")
        if kept_ids and not self._retain:
            raise ValueError("buffer state has retained samples but this buffer has retain=False")
        self._samples.clear()
        self._samples.extend(samples.get(f"s{i}", {}) for i in range(len(ids)))
        self._ids.clear()
        self._ids.extend(ids)
        self._held = len(ids)
        self._blocks = 0
        self._kept = [samples.get(f"r{i}", {}) for i in range(len(kept_ids))]
        self._kept_ids = kept_ids
        self._kept_count = len(kept_ids)


def _each_sample(items: Sequence[Any], ids: Sequence[int]) -> list[tuple[Sample, int]]:
    """(sample, insert id) of every sample of `items` (blocks materialized), in order."""
    out: list[tuple[Sample, int]] = []
    for item, first in zip(items, ids, strict=True):
        if type(item) is SampleBlock:
            out += zip(item.samples(), range(first, first + len(item)), strict=True)
        else:
            out.append((item, first))
    return out


class FIFOBuffer(_ServeOnceBuffer):
    """First in, first out: each sample is served exactly once, in insertion order.

    ``put`` blocks while ``capacity`` samples are held; ``get_batch(n)`` returns the
    ``n`` oldest samples. All operations are O(1) per sample. With ``retain=True``
    every served sample is also kept (memory not bounded by ``capacity``) so that
    :meth:`rewind` can re-queue them, in their original order, after those still held.
    A :class:`SampleBlock` given to ``put_available`` is held as one item (no sample
    object is built unless ``get_batch`` or a checkpoint asks for samples), and
    :meth:`get_block` serves blocks without building any. See
    :class:`~melissa_trainer.buffers.Buffer` for the blocking and closing contract.
    """

    kind = "fifo"
    _container = deque  # O(1) popleft
    _stores_blocks = True
    _samples: deque[Sample | SampleBlock]
    _ids: deque[int]

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        """Same contract as :meth:`Buffer.put`, with the non-blocking case inlined."""
        with self._lock:
            if (
                self._closed
                or self._held >= self._capacity
                or (self._limiter is not None and not self._limiter.can_insert())
            ):
                return self._put_locked(sample, timeout)
            self._samples.append(sample)
            self._ids.append(self._n_put)
            self._n_put += 1
            self._held += 1
            if self._limiter is not None:
                self._limiter.inserts += 1
            if self._held >= self._wake_len:
                self._readable.notify_all()

    def _pop(self, n: int) -> tuple[list[Sample | SampleBlock], list[int]]:
        """The oldest items holding `n` samples, a block split if needed."""
        items, ids = self._samples, self._ids
        out: list[Sample | SampleBlock] = []
        out_ids: list[int] = []
        while n:
            item = items[0]
            if type(item) is not SampleBlock:
                out.append(items.popleft())
                out_ids.append(ids.popleft())
                n -= 1
            elif len(item) <= n:
                out.append(items.popleft())
                out_ids.append(ids.popleft())
                n -= len(item)
                self._blocks -= 1
            else:  # the head block is split: its first n samples leave
                out.append(item[:n])
                out_ids.append(ids[0])
                items[0] = item[n:]
                ids[0] += n
                n = 0
        return out, out_ids

    def _take(self, n: int) -> list[Sample]:
        if not self._blocks:  # one sample per item
            pop_sample, pop_id = self._samples.popleft, self._ids.popleft
            samples: list[Any] = [pop_sample() for _ in range(n)]
            self._served(samples, [pop_id() for _ in range(n)], n)
            return samples
        items, ids = self._pop(n)
        self._served(items, ids, n)
        out: list[Sample] = []
        for item in items:
            if isinstance(item, SampleBlock):
                out += item.samples()
            else:
                out.append(item)
        return out

    def _take_closed(self, n: int) -> list[Sample]:
        return self._take(min(n, self._held))

    def _take_items(self, n: int) -> list[Any]:
        items, ids = self._pop(n)
        self._served(items, ids, n)
        return items

    def _take_items_closed(self, n: int) -> list[Any]:
        k = min(n, self._held)
        return self._take_items(k) if k else []


class FIROBuffer(_ServeOnceBuffer):
    """First in, random out: each sample is served exactly once, in random order.

    Each drawn sample is uniform among those held (O(1) swap-remove), which
    decorrelates consecutive batches of a time-ordered stream. The draws come from
    the buffer's seeded ``numpy.random.Generator``, whose state is checkpointed.
    ``retain=True`` and :meth:`rewind` behave as for :class:`FIFOBuffer`. See
    :class:`~melissa_trainer.buffers.Buffer` for the blocking and closing contract.
    """

    kind = "firo"
    _container = list  # O(1) swap-remove at any index

    def _take(self, n: int) -> list[Sample]:
        samples, ids = self._samples, self._ids
        out: list[Sample] = []
        out_ids: list[int] = []
        add_sample, add_id, pop_sample, pop_id = out.append, out_ids.append, samples.pop, ids.pop
        k = len(samples)
        for u in self._rng.random(n).tolist():  # uniform pick among the k held, swap-remove
            j = int(u * k)
            k -= 1
            if j > k:  # float rounding guard
                j = k
            add_sample(samples[j])
            add_id(ids[j])
            if j < k:
                samples[j] = pop_sample()
                ids[j] = pop_id()
            else:
                pop_sample()
                pop_id()
        self._served(out, out_ids, n)
        return out

    def _take_closed(self, n: int) -> list[Sample]:
        k = min(n, self._held)
        return self._take(k) if k else []
