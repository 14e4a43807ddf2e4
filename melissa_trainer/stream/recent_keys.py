"""`RecentKeys`: the keys of the last samples a receiver put, for its checkpoint.

A checkpoint's receiver record lists the (simulation id, time step) of the last
``recent_size`` samples recorded (see `ingest_state`): on resume, those recorded after the
buffer's snapshot are forgotten, so that their simulation sends them again (exactly once
across a restart). A ``deque(maxlen=...)`` of tuples did this at the cost of one tuple
made, and one freed, per sample: for a BATCH of 63 small fields, 63 of each, about as
much as the rest of the batch's bookkeeping (issue 42's pinned row). Here the keys are
two ring lists of ints, written a batch at a time by slice assignment: the same keys, in
the same order, as the deque held.

Not thread-safe (the receiver's ingester, or a snapshot it takes itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

__all__ = ["RecentKeys"]


class RecentKeys:
    """The last `size` keys (simulation id, time step) appended, oldest first: a
    ``deque(maxlen=size)`` of pairs, for the operations a receiver uses.

    Args:
        size: how many keys are kept (>= 1); older ones are dropped as new ones come.
    """

    __slots__ = ("_sids", "_steps", "_size", "_next", "_len")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"RecentKeys needs a size >= 1, got {size}")
        self._sids: list[int] = [0] * size
        self._steps: list[int] = [0] * size
        self._size, self._next, self._len = size, 0, 0  # _next: where the next key goes

    @property
    def maxlen(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._len

    def grow(self, size: int) -> None:
        """Keep at least the last `size` keys from now on (no change if it already
        does): the keys held stay, in order. O(size), once per new size."""
        if size <= self._size:
            return
        keys = list(self)
        n = len(keys)
        self._sids = [s for s, _ in keys] + [0] * (size - n)
        self._steps = [t for _, t in keys] + [0] * (size - n)
        self._size, self._next, self._len = size, n % size, n

    def append(self, key: tuple[int, int]) -> None:
        """Add one key (the newest)."""
        i = self._next
        self._sids[i], self._steps[i] = key
        self._next = 0 if i + 1 == self._size else i + 1
        if self._len < self._size:
            self._len += 1

    def extend_steps(self, simulation_id: int, steps: Sequence[int]) -> None:
        """Add the keys (`simulation_id`, t) for t in `steps` (a list of ints), in order:
        two slice assignments (four across the ring's end), no tuple per key."""
        size, k = self._size, len(steps)
        if k >= size:  # only the last `size` stay
            steps, k = steps[k - size :], size
        i = self._next
        j = i + k
        sids, ring = self._sids, self._steps
        if j <= size:
            sids[i:j] = [simulation_id] * k
            ring[i:j] = steps
        else:
            m = size - i
            sids[i:] = [simulation_id] * m
            ring[i:] = steps[:m]
            sids[: k - m] = [simulation_id] * (k - m)
            ring[: k - m] = steps[m:]
            j -= size
        self._next = 0 if j == size else j
        self._len = min(size, self._len + k)

    def extend(self, keys: Iterable[tuple[int, int]]) -> None:
        """Add `keys` one by one, in order."""
        for key in keys:
            self.append(key)

    def pop(self) -> tuple[int, int]:
        """Remove and return the newest key.

        Raises:
            IndexError: no key is held.
        """
        if not self._len:
            raise IndexError("pop from an empty RecentKeys")
        i = self._next - 1 if self._next else self._size - 1
        self._next, self._len = i, self._len - 1
        return self._sids[i], self._steps[i]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        """The keys, oldest first."""
        size, n = self._size, self._len
        start = (self._next - n) % size
        sids, steps = self._sids, self._steps
        for k in range(n):
            i = start + k
            if i >= size:
                i -= size
            yield sids[i], steps[i]
