"""Types shared by all buffers: :data:`Sample`, :class:`BufferStats`, :class:`BufferClosedError`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["BufferClosedError", "BufferStats", "Sample"]

#: One sample: field name -> numpy array (0-d arrays for scalars).
Sample = dict[str, np.ndarray]


class BufferClosedError(RuntimeError):
    """Raised by :meth:`Buffer.put` once the buffer has been closed (end of reception)."""


@dataclass
class BufferStats:
    """Counters of a buffer, as returned by :meth:`Buffer.stats` (all in samples).

    Attributes:
        size: samples currently held.
        capacity: the buffer's capacity.
        put: total samples inserted since creation (re-queued samples excluded).
        got: total samples served, re-draws included.
        evicted: samples that left without being served on their way out (reservoir
            evictions and ``max_sample_reuse`` removals; always 0 for FIFO/FIRO).
        reuse_histogram: draw count -> number of samples that left the buffer having
            been drawn that many times (FIFO/FIRO: every served sample leaves with 1).
        mean_age: mean, over served samples, of the number of inserts that happened
            between a sample's insertion and its serving (0.0 before the first draw).
    """

    size: int
    capacity: int
    put: int
    got: int
    evicted: int
    reuse_histogram: dict[int, int] = field(default_factory=dict)
    mean_age: float = 0.0
