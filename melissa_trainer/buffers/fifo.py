"""Buffers that serve each sample exactly once: FIFO (in order) and FIRO (random order)."""

from __future__ import annotations

from collections import deque
from collections.abc import MutableSequence, Sequence
from typing import Any, ClassVar

import numpy as np

from . import _state
from ._common import BufferClosedError, Sample
from .base import Buffer
from .rate_limiter import RateLimiter

__all__ = ["FIFOBuffer", "FIROBuffer"]


class _ServeOnceBuffer(Buffer):
    """Common part of FIFO and FIRO: the retained list, bookkeeping, checkpoints.

    Samples and their insert ids are kept in parallel containers (no per-sample
    tuple: fewer allocations and no garbage-collector work on the put path).
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
        self._kept: list[Sample] = []  # retained samples, in serving order
        self._kept_ids: list[int] = []

    # held samples and ids, in the order that determines future serving
    _samples: MutableSequence[Sample]
    _ids: MutableSequence[int]
    #: the type of `_samples` and `_ids`, chosen by each policy
    _container: ClassVar[type[MutableSequence[Any]]]

    def _size(self) -> int:
        return len(self._samples)

    def _has_room(self) -> bool:
        return len(self._samples) < self._capacity

    def _insert(self, sample: Sample, insert_id: int) -> None:
        self._samples.append(sample)
        self._ids.append(insert_id)

    def put_available(self, samples: Sequence[Sample]) -> int:
        """Same contract as :meth:`Buffer.put_available`; without a rate limiter, one
        `extend` for what fits."""
        if self._limiter is not None:
            return super().put_available(samples)
        with self._lock:
            if self._closed:
                raise BufferClosedError("put_available() on a closed buffer (reception has ended)")
            n = min(len(samples), self._capacity - len(self._samples))
            if n <= 0:
                return 0
            self._samples.extend(samples[:n])
            self._ids.extend(range(self._n_put, self._n_put + n))
            self._n_put += n
            if len(self._samples) >= self._wake_len:
                self._readable.notify_all()
            return n

    def _served(self, samples: list[Sample], ids: list[int]) -> list[Sample]:
        """Bookkeeping for samples leaving the buffer to be served."""
        if samples:
            self._age_sum += len(ids) * (self._n_put - 1) - sum(ids)
            self._record_leave(1, len(samples))
            if self._retain:
                self._kept.extend(samples)
                self._kept_ids.extend(ids)
        return samples

    def _rewind(self) -> int:
        if not self._retain:
            raise RuntimeError(
                f"{type(self).__name__}.rewind() needs retain=True: FIFO/FIRO buffers forget "
                "served samples unless asked to keep them"
            )
        count = len(self._kept)
        self._samples.extend(self._kept)
        self._ids.extend(self._kept_ids)
        self._kept, self._kept_ids = [], []
        return count

    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        for slot, sample in enumerate(self._samples):
            _state.encode_sample(arrays, f"s{slot}", sample)
        for i, sample in enumerate(self._kept):
            _state.encode_sample(arrays, f"r{i}", sample)
        return {"insert_ids": list(self._ids), "retained_insert_ids": list(self._kept_ids)}

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
        self._kept = [samples.get(f"r{i}", {}) for i in range(len(kept_ids))]
        self._kept_ids = kept_ids


class FIFOBuffer(_ServeOnceBuffer):
    """First in, first out: each sample is served exactly once, in insertion order.

    ``put`` blocks while ``capacity`` samples are held; ``get_batch(n)`` returns the
    ``n`` oldest samples. All operations are O(1) per sample. With ``retain=True``
    every served sample is also kept (memory not bounded by ``capacity``) so that
    :meth:`rewind` can re-queue them, in their original order, after those still held.
    See :class:`~melissa_trainer.buffers.Buffer` for the blocking and closing contract.
    """

    kind = "fifo"
    _container = deque  # O(1) popleft
    _samples: deque[Sample]
    _ids: deque[int]

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        """Same contract as :meth:`Buffer.put`, with the non-blocking case inlined."""
        with self._lock:
            if (
                self._closed
                or len(self._samples) >= self._capacity
                or (self._limiter is not None and not self._limiter.can_insert())
            ):
                return self._put_locked(sample, timeout)
            self._samples.append(sample)
            self._ids.append(self._n_put)
            self._n_put += 1
            if self._limiter is not None:
                self._limiter.inserts += 1
            if len(self._samples) >= self._wake_len:
                self._readable.notify_all()

    def _take(self, n: int) -> list[Sample]:
        pop_sample, pop_id = self._samples.popleft, self._ids.popleft
        samples = [pop_sample() for _ in range(n)]
        return self._served(samples, [pop_id() for _ in range(n)])

    def _take_closed(self, n: int) -> list[Sample]:
        return self._take(min(n, len(self._samples)))


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
        return self._served(out, out_ids)

    def _take_closed(self, n: int) -> list[Sample]:
        k = min(n, len(self._samples))
        return self._take(k) if k else []
