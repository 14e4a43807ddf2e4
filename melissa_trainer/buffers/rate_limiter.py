"""Sample-to-insert rate limiting (Reverb's ``SampleToInsertRatio``, Melissa's rate limit).

A :class:`RateLimiter` keeps the number of draws per inserted sample close to a target
ratio ``r`` whatever the relative speed of the producers (simulations) and of the
consumer (training loop): a fast GPU cannot re-draw the same few samples thousands of
times, and fast simulations cannot flood a reservoir with samples that are evicted
before being drawn.
"""

from __future__ import annotations

import math
from typing import Any

from melissa_trainer.common.checks import as_count

__all__ = ["RateLimiter"]


class RateLimiter:
    """Arithmetic of the sample-to-insert ratio; the buffer owns the locking.

    The limiter counts inserts ``i`` and draws ``s``, both in samples (a batch of 64
    is 64 draws; re-draws of the same sample count each time). With ``r =
    samples_per_insert``, ``m = min_size_to_sample`` and ``t = tolerance``:

    * a read of ``n`` samples waits while ``s + n > r * (i - m) + t``;
    * an insert waits while ``r * (i + 1 - m) - s > t``.

    The first ``m`` inserts are therefore never held back and do not count towards
    the ratio. Over a long run, ``s / (i - m)`` stays within ``t / (i - m)`` of ``r``.

    Liveness is the caller's business: choose ``tolerance >= samples_per_insert +
    (largest read size)``, otherwise a blocked insert and a blocked read can wait for
    each other forever. :class:`~melissa_trainer.buffers.Buffer` additionally never lets
    the limiter hold back an insert while a read waits for more samples, nor a read
    while an insert waits for room, and ignores the limiter for reads once closed.

    The object is *not* thread-safe on its own: it is a pure helper queried and
    updated under the owning buffer's lock. Its counters are part of the buffer's
    ``state_dict``.

    Args:
        samples_per_insert: target number of draws per inserted sample (``r > 0``).
        tolerance: allowed deviation from the target, in samples (``>= 0``).
        min_size_to_sample: number of initial inserts that are free of the ratio.

    Raises:
        ValueError: ``samples_per_insert <= 0`` (or not finite), ``tolerance < 0``
            (or not finite), or ``min_size_to_sample < 0``.
    """

    __slots__ = ("_r", "_tolerance", "_min", "inserts", "samples")

    def __init__(
        self, samples_per_insert: float, tolerance: float, min_size_to_sample: int
    ) -> None:
        r = float(samples_per_insert)
        tol = float(tolerance)
        if not math.isfinite(r) or r <= 0:
            raise ValueError(
                f"samples_per_insert must be a finite number > 0, got {samples_per_insert!r}"
            )
        if not math.isfinite(tol) or tol < 0:
            raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
        as_count("min_size_to_sample", min_size_to_sample, 0, floats=False)
        self._r = r
        self._tolerance = tol
        self._min = int(min_size_to_sample)
        #: inserts counted so far (all of them, including the first ``min_size_to_sample``).
        self.inserts = 0
        #: samples drawn so far (re-draws included).
        self.samples = 0

    @property
    def samples_per_insert(self) -> float:
        return self._r

    @property
    def tolerance(self) -> float:
        return self._tolerance

    @property
    def min_size_to_sample(self) -> int:
        return self._min

    def can_insert(self) -> bool:
        """True if one more insert keeps the ratio within tolerance."""
        return self._r * (self.inserts + 1 - self._min) - self.samples <= self._tolerance

    def can_sample(self, n: int) -> bool:
        """True if ``n`` more draws keep the ratio within tolerance."""
        return self.samples + n <= self._r * (self.inserts - self._min) + self._tolerance

    def on_insert(self, count: int = 1) -> None:
        """Record ``count`` inserts."""
        self.inserts += count

    def on_sample(self, count: int) -> None:
        """Record ``count`` draws."""
        self.samples += count

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable counters and parameters."""
        return {
            "samples_per_insert": self._r,
            "tolerance": self._tolerance,
            "min_size_to_sample": self._min,
            "inserts": self.inserts,
            "samples": self.samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters (the parameters stay those given to the constructor)."""
        try:
            inserts = int(state["inserts"])
            samples = int(state["samples"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid rate limiter state: {state!r}") from exc
        if inserts < 0 or samples < 0:
            raise ValueError(f"invalid rate limiter state: {state!r}")
        self.inserts = inserts
        self.samples = samples

    def __repr__(self) -> str:
        return (
            f"RateLimiter(samples_per_insert={self._r}, tolerance={self._tolerance}, "
            f"min_size_to_sample={self._min}, inserts={self.inserts}, samples={self.samples})"
        )
