"""Reservoir buffer: keeps a random subset of the stream, draws with replacement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from melissa_trainer.buffers._common import BufferClosedError
from melissa_trainer.common.checks import as_count

from . import _slots
from ._common import Sample
from ._reservoir_state import ReservoirState
from .base import Buffer
from .config import choices_problem
from .rate_limiter import RateLimiter

__all__ = ["ReservoirBuffer"]


class ReservoirBuffer(ReservoirState, Buffer):
    """Samples may be drawn several times; an incoming sample evicts one already drawn.

    * ``put`` when full evicts a uniformly random sample among those drawn at least
      once (with ``evict_choices=e > 1``: the most drawn of ``e`` such samples, each
      uniformly random, the first on a tie); it blocks only while no held sample has
      ever been drawn, so an unseen sample is never lost (back-pressure instead).
    * ``get_batch(n)`` draws ``n`` samples uniformly at random *with replacement* among
      those held (the buffer's seeded ``numpy.random.Generator``, checkpointed; with
      ``draw_choices=d > 1``, each draw is the least drawn of ``d`` uniformly random
      held samples, the first on a tie: a sample's chance falls with its draw count,
      so the draws spread more evenly over a stream, late samples nearer their share
      of them; ``d`` uniforms and up to ``d`` draw-count looks per draw). A
      sample that reaches ``max_sample_reuse`` draws leaves the buffer (it counts as
      evicted and in ``reuse_histogram``); no sample is ever drawn more often, not
      even twice within one batch.
    * After ``close()``, reads serve every sample never drawn, each once, in random
      order, then return ``[]``.
    * ``rewind()`` resets the draw counts of the current contents to 0: after a close
      and a drain, this serves the whole reservoir once more (a pseudo-epoch). The
      ``retain`` flag is accepted for uniformity and has no effect.

    Every put and every drawn sample costs O(1) (O(e), O(d) with choices): slots are
    kept in two index lists (never drawn / drawn at least once) with swap-remove. See
    :class:`~melissa_trainer.buffers.Buffer` for the blocking and closing contract; its
    checkpoint is `ReservoirState`'s (``_reservoir_state.py``).

    Args:
        max_sample_reuse: maximum number of draws of one sample (``None``: no limit).
        draw_choices: candidates per draw (>= 1; 1: uniform draws, the default).
        evict_choices: candidates per eviction (>= 1; 1: uniform among the drawn).
            Both are part of the checkpoint: a snapshot loads only into a buffer with
            the same (one from before these options: 1 and 1).
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
        draw_choices: int = 1,
        evict_choices: int = 1,
    ) -> None:
        super().__init__(capacity, watermark, seed=seed, rate_limiter=rate_limiter, retain=retain)
        self._max_reuse = (
            None if max_sample_reuse is None else as_count("max_sample_reuse", max_sample_reuse, 1)
        )
        self._draw_choices = as_count("draw_choices", draw_choices, 1)
        self._evict_choices = as_count("evict_choices", evict_choices, 1)
        for name, value in (("draw_choices", draw_choices), ("evict_choices", evict_choices)):
            for problem in choices_problem(name, value):
                raise ValueError(problem)
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

    @property
    def draw_choices(self) -> int:
        return self._draw_choices

    @property
    def evict_choices(self) -> int:
        return self._evict_choices

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
        else:  # full: evict a drawn sample (_has_room guarantees one)
            k = len(self._drawn)
            if self._evict_choices == 1:  # uniformly random
                slot = self._drawn[min(int(self._rng.random() * k), k - 1)]
            else:
                slot = self._drawn[self._most_drawn(self._rng.random(self._evict_choices), k)]
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
        evictions of a burst draw their uniforms in one call and their bookkeeping is
        one loop for the burst (`_evict_slots`): the same random numbers, victims and
        state as one `put` per sample, at a fraction of the cost (this is the
        receiver's path for small samples; `tests/buffers/test_reservoir_bursts.py`)."""
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

    def _most_drawn(self, uniforms: Any, k: int) -> int:
        """The position in `_drawn` (of length `k`) of the most-drawn of the candidates
        the `uniforms` pick (the first of them on a tie)."""
        drawn, draws = self._drawn, self._draws
        best, most = 0, -1
        for u in uniforms:
            j = int(u * k)
            if j >= k:  # float rounding guard
                j = k - 1
            count = draws[drawn[j]]
            if count > most:
                best, most = j, count
        return best

    def _evict_for(self, samples: Sequence[Sample]) -> None:
        """`_insert` of each sample into a full buffer holding at least
        `len(samples)` drawn samples, for the whole burst (`_evict_slots`)."""
        held = self._slots
        for slot, sample in zip(self._evict_slots(len(samples)), samples, strict=True):
            held[slot] = sample

    def _evict_slots(self, n: int) -> list[int]:
        """The index bookkeeping of `n` inserts into a full buffer holding at least `n`
        drawn samples; returns the victims' slots, in order (so appended to `_undrawn`,
        with insert ids from `_n_put` on). The same uniforms (one call for the burst),
        victims, lists and counters as `n` calls of `_insert`; `_slots` of the victims
        still hold the evicted samples: the caller stores the new ones there."""
        undrawn, e = self._undrawn, self._evict_choices
        victims = _slots.evict_drawn(
            self._drawn,
            self._pos,
            self._draws,
            self._ins,
            self._reuse_hist,
            self._rng.random(n * e).tolist(),
            e,
            self._n_put,
            len(undrawn),
        )
        undrawn.extend(victims)
        self._n_evicted += n
        self._n_put += n
        return victims

    def _insert_slots(self, n: int) -> list[int]:
        """The index bookkeeping of `n` inserts that need no eviction (at most the free
        and never used slots); returns their slots, in order, as `_evict_slots` does:
        the free slots first, the last freed first, then new ones (as `n` calls of
        `_insert`). `_slots` of these hold None: the caller stores the samples."""
        free, slots, undrawn = self._free, self._slots, self._undrawn
        reused = min(n, len(free))
        got = free[len(free) - reused :]
        del free[len(free) - reused :]
        got.reverse()  # `_insert` pops the last freed first
        if n > reused:
            first, grow = len(slots), [0] * (n - reused)
            got.extend(range(first, first + n - reused))
            slots.extend([None] * (n - reused))
            self._draws.extend(grow)
            self._ins.extend(grow)
            self._pos.extend(grow)
        draws, ins, pos = self._draws, self._ins, self._pos
        i, p = self._n_put, len(undrawn)
        for slot in got:
            draws[slot] = 0
            ins[slot] = i
            i += 1
            pos[slot] = p
            p += 1
        undrawn.extend(got)
        self._n_put = i
        return got

    def _draw(self, uniforms: list[float], undrawn_only: bool, choices: int = 1) -> list[Sample]:
        """One draw per `choices` uniforms in [0, 1): among all held samples, or the
        undrawn only; of `choices` candidates, the least drawn (the first on a tie: an
        undrawn candidate, as soon as one comes)."""
        undrawn, drawn, pos = self._undrawn, self._drawn, self._pos
        draws, ins, slots = self._draws, self._ins, self._slots
        max_reuse = self._max_reuse
        ku, kd = len(undrawn), len(drawn)
        ins_sum = 0
        out: list[Any] = []
        add = out.append
        it = iter(uniforms)
        for u in it:
            k = ku if undrawn_only else ku + kd
            j = int(u * k)
            if j >= k:  # float rounding guard
                j = k - 1
            if choices == 2:  # (the common choice, inlined: no inner loop)
                u = next(it)
                if j >= ku:  # a drawn first candidate: the second if it has fewer
                    c = int(u * k)
                    if c >= k:
                        c = k - 1
                    if c < ku or draws[drawn[c - ku]] < draws[drawn[j - ku]]:
                        j = c
            elif choices > 1:  # the least drawn of `choices` candidates: d - 1 more
                fewest = draws[drawn[j - ku]] if j >= ku else 0  # (drawn: >= 1)
                for _ in range(choices - 1):
                    u = next(it)
                    if not fewest:  # an undrawn candidate: the fewest draws there are
                        continue
                    c = int(u * k)
                    if c >= k:
                        c = k - 1
                    if c < ku:
                        j, fewest = c, 0
                    elif draws[drawn[c - ku]] < fewest:
                        j, fewest = c, draws[drawn[c - ku]]
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
        d = self._draw_choices
        return self._draw(self._rng.random(n * d).tolist(), undrawn_only=False, choices=d)

    def _take_closed(self, n: int) -> list[Sample]:
        k = min(n, len(self._undrawn))
        return self._draw(self._rng.random(k).tolist(), undrawn_only=True) if k else []

    def _replayable(self) -> int:
        return len(self._undrawn) + len(self._drawn)

    def _rewind(self) -> int:
        for slot in self._drawn:
            self._draws[slot] = 0
            self._pos[slot] = len(self._undrawn)
            self._undrawn.append(slot)
        self._drawn.clear()
        return len(self._undrawn)
