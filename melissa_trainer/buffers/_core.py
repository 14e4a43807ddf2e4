"""The state of a :class:`~melissa_trainer.buffers.Buffer` and its policy interface.

`BufferCore` sets the state every buffer holds (configuration, lock and conditions,
waiters' bookkeeping, counters) and declares the hooks a policy (FIFO, FIRO, Reservoir)
implements. The blocking contract is `Buffer` (``base.py``), built from this core, the
slow paths that wait (``_waiting.py``) and the snapshots (``_snapshot.py``).
"""

from __future__ import annotations

import abc
import threading
from typing import Any, ClassVar

import numpy as np

from melissa_trainer.common.checks import as_count

from ._common import Sample
from .config import size_problem
from .rate_limiter import RateLimiter

__all__ = ["NO_WAITER", "BufferCore"]

NO_WAITER = 1 << 62  # "no read is waiting" sentinel for the wake-up threshold


class BufferCore(abc.ABC):
    """The state and the policy hooks of a buffer; see `Buffer` for the constructor's
    arguments and the contract. Everything here is touched with the lock held, except
    the constructor."""

    #: name of the policy, as accepted by ``make_buffer`` and stored in checkpoints.
    kind: ClassVar[str] = ""

    def __init__(
        self,
        capacity: int,
        watermark: int = 1,
        *,
        seed: int = 0,
        rate_limiter: RateLimiter | None = None,
        retain: bool = False,
    ) -> None:
        # The invariants a direct caller needs; `BufferConfig` checks the same rules
        # (the same `size_problem`) for `make_buffer`.
        capacity = as_count("capacity", capacity, 1)
        watermark = as_count("watermark", watermark, 1)
        problem = size_problem(capacity, watermark)
        if problem is not None:
            raise ValueError(problem)
        if rate_limiter is not None and not isinstance(rate_limiter, RateLimiter):
            raise TypeError(
                f"rate_limiter must be a RateLimiter, got {type(rate_limiter).__name__}"
            )
        self._capacity = int(capacity)
        self._watermark = int(watermark)
        self._rng = np.random.default_rng(seed)
        self._limiter = rate_limiter
        self._retain = bool(retain)

        self._lock = threading.Lock()
        self._readable = threading.Condition(self._lock)
        self._writable = threading.Condition(self._lock)
        self._closed = False
        # waiters' bookkeeping (only touched under the lock)
        self._get_needs: list[int] = []  # size each waiting read needs
        self._wake_len = NO_WAITER  # min(self._get_needs): notify readers at this size
        self._n_size_blocked = 0  # reads waiting for more samples
        self._n_put_waiting = 0  # puts waiting (room or limiter)
        self._n_room_blocked = 0  # puts waiting for room (a parked `try_put` included)
        self._parked = False  # a `try_put` was refused for lack of room (see there)
        # counters
        self._n_put = 0
        self._n_got = 0
        self._n_evicted = 0
        self._age_sum = 0
        self._reuse_hist: dict[int, int] = {}

    # ------------------------------------------------------------------ policy hooks
    # All hooks are called with the lock held.

    @abc.abstractmethod
    def _size(self) -> int:
        """Samples currently held."""

    @abc.abstractmethod
    def _has_room(self) -> bool:
        """True if ``_insert`` can run now (it may evict)."""

    @abc.abstractmethod
    def _insert(self, sample: Sample, insert_id: int) -> None:
        """Store ``sample``; ``insert_id`` is the number of inserts before it."""

    @abc.abstractmethod
    def _take(self, n: int) -> list[Sample]:
        """Serve ``n <= _size()`` samples (not closed); update age, histogram, eviction."""

    @abc.abstractmethod
    def _take_closed(self, n: int) -> list[Sample]:
        """Serve up to ``n`` of what is left to serve after close (``[]`` if nothing)."""

    @abc.abstractmethod
    def _rewind(self) -> int:
        """Make retained samples servable again; return how many."""

    def _replayable(self) -> int | None:
        """What ``_rewind`` now would return, without rewinding; None: not known."""
        return None

    @abc.abstractmethod
    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """Fill ``arrays`` with the held samples, return the policy's meta."""

    @abc.abstractmethod
    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        """Restore the contents from decoded samples (keyed by prefix) and meta."""

    # ------------------------------------------------------------------ shared helpers
    def _unpark(self) -> None:
        """Forget the producer that `try_put` refused for lack of room (lock held)."""
        if self._parked:
            self._parked = False
            self._n_room_blocked -= 1

    def _record_leave(self, draws: int, count: int = 1) -> None:
        """Count `count` samples leaving the buffer after `draws` draws each."""
        self._reuse_hist[draws] = self._reuse_hist.get(draws, 0) + count
