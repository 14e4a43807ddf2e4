"""Reservoir buffer: keeps a random subset of the stream, draws with replacement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.common.checks import as_count

from . import _state
from ._common import Sample
from .base import Buffer, BufferClosedError
from .rate_limiter import RateLimiter

__all__ = ["ReservoirBuffer"]


class ReservoirBuffer(Buffer):
    """Samples may be drawn several times; an incoming sample evicts one already drawn.

    * ``put`` when full evicts a uniformly random sample among those drawn at least
      once; it blocks only while no held sample has ever been drawn, so an unseen
      sample is never lost (back-pressure instead).
    * ``get_batch(n)`` draws ``n`` samples uniformly at random *with replacement* among
      those held (the buffer's seeded ``numpy.random.Generator``, checkpointed). A
      sample that reaches ``max_sample_reuse`` draws leaves the buffer (it counts as
      evicted and in ``reuse_histogram``); no sample is ever drawn more often, not
      even twice within one batch.
    * After ``close()``, reads serve every sample never drawn, each once, in random
      order, then return ``[]``.
    * ``rewind()`` resets the draw counts of the current contents to 0: after a close
      and a drain, this serves the whole reservoir once more (a pseudo-epoch). The
      ``retain`` flag is accepted for uniformity and has no effect.

    Every put and every drawn sample costs O(1): slots are kept in two index lists
    (never drawn / drawn at least once) with swap-remove. See
    :class:`~melissa_trainer.buffers.Buffer` for the blocking and closing contract.

    Args:
        max_sample_reuse: maximum number of draws of one sample (``None``: no limit).
    """

    kind = "reservoir"

    def __init__(
        self,
        capacity: int,
        watermark: int = 1,
        *,
        seed: int = 0,
        rate_limiter: RateLimiter | None = None,
        retain: bool = False,
        max_sample_reuse: int | None = None,
    ) -> None:
        super().__init__(capacity, watermark, seed=seed, rate_limiter=rate_limiter, retain=retain)
        self._max_reuse = (
            None if max_sample_reuse is None else as_count("max_sample_reuse", max_sample_reuse, 1)
        )
        # per slot (slots are reused; len(_slots) <= capacity)
        self._slots: list[Sample | None] = []
        self._draws: list[int] = []
        self._ins: list[int] = []
        self._pos: list[int] = []  # index of the slot in _undrawn or _drawn
        # index lists
        self._undrawn: list[int] = []
        self._drawn: list[int] = []
        self._free: list[int] = []

    @property
    def max_sample_reuse(self) -> int | None:
        return self._max_reuse

    # ------------------------------------------------------------------ policy hooks
    def _size(self) -> int:
        return len(self._undrawn) + len(self._drawn)

    def _has_room(self) -> bool:
        return bool(self._drawn) or len(self._undrawn) < self._capacity

    def _unlink(self, lst: list[int], j: int) -> None:
        """Swap-remove position ``j`` of index list ``lst``."""
        last = lst.pop()
        if j < len(lst):
            lst[j] = last
            self._pos[last] = j

    def _drop(self, slot: int) -> None:
        """Remove a drawn sample from the buffer (eviction or max reuse)."""
        self._unlink(self._drawn, self._pos[slot])
        self._slots[slot] = None
        self._free.append(slot)
        self._n_evicted += 1
        self._record_leave(self._draws[slot])

    def _insert(self, sample: Sample, insert_id: int) -> None:
        if self._free:
            slot = self._free.pop()
        elif len(self._slots) < self._capacity:
            slot = len(self._slots)
            self._slots.append(None)
            self._draws.append(0)
            self._ins.append(0)
            self._pos.append(0)
        else:  # full: evict a uniformly random drawn sample (_has_room guarantees one)
            k = len(self._drawn)
            slot = self._drawn[min(int(self._rng.random() * k), k - 1)]
            self._drop(slot)
            self._free.pop()
        self._slots[slot] = sample
        self._draws[slot] = 0
        self._ins[slot] = insert_id
        self._pos[slot] = len(self._undrawn)
        self._undrawn.append(slot)

    def room(self) -> int | None:
        """`Buffer.room`: the free slots and the drawn samples (each may be evicted), as
        `put_available` counts them; None with a rate limiter, or once closed (a put
        then says so)."""
        if self._limiter is not None:
            return None
        with self._lock:
            if self._closed:
                return None
            return max(0, self._capacity - self._size() + len(self._drawn))

    def put_available(self, samples: Sequence[Sample]) -> int:
        """Same contract as :meth:`Buffer.put_available`. Without a rate limiter, the
        evictions of a burst draw their uniforms in one call and are done inline: the
        same random numbers, victims and state as one `put` per sample, at a fraction
        of the cost (this is the receiver's path for small samples)."""
        if self._limiter is not None:
            return super().put_available(samples)
        with self._lock:
            if self._closed:
                raise BufferClosedError("put_available() on a closed buffer (reception has ended)")
            room = self._capacity - self._size()  # inserts without an eviction
            n = min(len(samples), room + len(self._drawn))
            for sample in samples[: min(n, room)]:
                self._insert(sample, self._n_put)
                self._n_put += 1
            if n > room:
                self._evict_for(samples[room:n])
            if n and self._size() >= self._wake_len:
                self._readable.notify_all()
            return n

    def _evict_for(self, samples: Sequence[Sample]) -> None:
        """`_insert` of each sample into a full buffer holding at least
        `len(samples)` drawn samples, inlined."""
        slots, draws, ins, pos = self._slots, self._draws, self._ins, self._pos
        undrawn, drawn, hist = self._undrawn, self._drawn, self._reuse_hist
        insert_id = self._n_put
        for sample, u in zip(samples, self._rng.random(len(samples)).tolist(), strict=True):
            k = len(drawn)
            j = int(u * k)
            if j >= k:  # float rounding guard, as in `_insert`
                j = k - 1
            slot = drawn[j]
            last = drawn.pop()  # swap-remove the victim from `drawn`
            if j < k - 1:
                drawn[j] = last
                pos[last] = j
            count = draws[slot]
            hist[count] = hist.get(count, 0) + 1
            slots[slot] = sample
            draws[slot] = 0
            ins[slot] = insert_id
            insert_id += 1
            pos[slot] = len(undrawn)
            undrawn.append(slot)
        self._n_evicted += len(samples)
        self._n_put = insert_id

    def _draw(self, uniforms: list[float], undrawn_only: bool) -> list[Sample]:
        """One draw per uniform in [0, 1): among all held samples, or the undrawn only."""
        undrawn, drawn, pos = self._undrawn, self._drawn, self._pos
        draws, ins, slots = self._draws, self._ins, self._slots
        max_reuse = self._max_reuse
        ku, kd = len(undrawn), len(drawn)
        ins_sum = 0
        out: list[Any] = []
        add = out.append
        for u in uniforms:
            k = ku if undrawn_only else ku + kd
            j = int(u * k)
            if j >= k:  # float rounding guard
                j = k - 1
            if j >= ku:  # already drawn (the steady state)
                slot = drawn[j - ku]
            else:  # first draw: swap-remove from undrawn, append to drawn
                slot = undrawn[j]
                last = undrawn.pop()
                ku -= 1
                if j < ku:
                    undrawn[j] = last
                    pos[last] = j
                pos[slot] = kd
                drawn.append(slot)
                kd += 1
            count = draws[slot] + 1
            draws[slot] = count
            ins_sum += ins[slot]
            add(slots[slot])
            if max_reuse is not None and count >= max_reuse:
                self._drop(slot)
                kd -= 1
        self._age_sum += len(out) * (self._n_put - 1) - ins_sum
        return out

    def _take(self, n: int) -> list[Sample]:
        return self._draw(self._rng.random(n).tolist(), undrawn_only=False)

    def _take_closed(self, n: int) -> list[Sample]:
        k = min(n, len(self._undrawn))
        return self._draw(self._rng.random(k).tolist(), undrawn_only=True) if k else []

    def _rewind(self) -> int:
        for slot in self._drawn:
            self._draws[slot] = 0
            self._pos[slot] = len(self._undrawn)
            self._undrawn.append(slot)
        self._drawn.clear()
        return len(self._undrawn)

    # ------------------------------------------------------------------ checkpoints
    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        for slot in self._undrawn + self._drawn:
            sample = self._slots[slot]
            assert sample is not None
            _state.encode_sample(arrays, f"s{slot}", sample)
        return {
            "max_sample_reuse": self._max_reuse,
            "n_slots": len(self._slots),
            "draws": list(self._draws),
            "insert_ids": list(self._ins),
            "undrawn": list(self._undrawn),
            "drawn": list(self._drawn),
            "free": list(self._free),
        }

    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        if meta.get("max_sample_reuse") != self._max_reuse:
            raise ValueError(
                f"buffer state has max_sample_reuse={meta.get('max_sample_reuse')!r}, "
                f"this buffer {self._max_reuse!r}"
            )
        n_slots = meta.get("n_slots")
        if not isinstance(n_slots, int) or not 0 <= n_slots <= self._capacity:
            raise ValueError(f"malformed buffer state: n_slots={n_slots!r}")
        draws = _state.int_list("draws", meta.get("draws"), length=n_slots)
        ins = _state.int_list("insert_ids", meta.get("insert_ids"), length=n_slots)
        undrawn = _state.int_list("undrawn", meta.get("undrawn"), upper=n_slots)
        drawn = _state.int_list("drawn", meta.get("drawn"), upper=n_slots)
        free = _state.int_list("free", meta.get("free"), upper=n_slots)
        if sorted(undrawn + drawn + free) != list(range(n_slots)):
            raise ValueError(
                "malformed buffer state: undrawn/drawn/free do not partition the slots"
            )
        if any(draws[s] != 0 for s in undrawn) or any(draws[s] < 1 for s in drawn):
            raise ValueError("malformed buffer state: draw counts disagree with the index lists")
        if self._max_reuse is not None and any(draws[s] >= self._max_reuse for s in drawn):
            raise ValueError("malformed buffer state: a held sample reached max_sample_reuse")
        unknown = set(samples) - {f"s{s}" for s in undrawn + drawn}
        if unknown:
            raise ValueError(f"malformed buffer state: unexpected samples {sorted(unknown)[:5]}")
        slots: list[Sample | None] = [None] * n_slots
        pos = [0] * n_slots
        for lst in (undrawn, drawn):
            for j, s in enumerate(lst):
                slots[s] = samples.get(f"s{s}", {})
                pos[s] = j
        self._slots, self._draws, self._ins, self._pos = slots, draws, ins, pos
        self._undrawn, self._drawn, self._free = undrawn, drawn, free
