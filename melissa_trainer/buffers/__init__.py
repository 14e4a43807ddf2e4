"""In-memory sample buffers between the receiver thread and the training loop.

* :class:`FIFOBuffer`: first in, first out; each sample served once.
* :class:`FIROBuffer`: first in, random out; each sample served once.
* :class:`ReservoirBuffer`: random subset, drawn with replacement; training never starves.

All buffers are bounded (``capacity`` samples; the optional ``retain`` list of
FIFO/FIRO is the one exception), thread-safe, blocking (back-pressure on ``put``,
"no data yet" on ``get_batch``), hold reads back until a ``watermark`` is reached,
drain after ``close()`` and checkpoint to safetensors + JSON. See :class:`Buffer`.

A :class:`SampleBlock` holds consecutive samples as one array per field: a receiver
puts batched small fields as blocks, which a FIFO holds as they are, and
``Buffer.get_block`` serves a batch as one (no per-sample object on either side).
"""

from __future__ import annotations

from ._common import BufferClosedError, BufferStats, Sample, as_count
from .base import Buffer
from .block import SampleBlock
from .fifo import FIFOBuffer, FIROBuffer
from .rate_limiter import RateLimiter
from .reservoir import ReservoirBuffer

__all__ = [
    "BUFFER_KINDS",
    "Buffer",
    "BufferClosedError",
    "BufferStats",
    "FIFOBuffer",
    "FIROBuffer",
    "RateLimiter",
    "ReservoirBuffer",
    "Sample",
    "SampleBlock",
    "make_buffer",
]

#: buffer kinds accepted by :func:`make_buffer`.
BUFFER_KINDS: dict[str, type[Buffer]] = {
    "fifo": FIFOBuffer,
    "firo": FIROBuffer,
    "reservoir": ReservoirBuffer,
}


def make_buffer(
    kind: str,
    capacity: int,
    watermark: int = 1,
    *,
    seed: int = 0,
    max_sample_reuse: int | None = None,
    sample_to_insert_ratio: float | None = None,
    sample_to_insert_tolerance: float | None = None,
    retain: bool = False,
) -> Buffer:
    """Build a buffer from configuration values (e.g. ``TrainingArguments``).

    Args:
        kind: ``"fifo"``, ``"firo"`` or ``"reservoir"`` (case-insensitive).
        capacity: maximum number of samples held (``>= 1``).
        watermark: samples needed before reads are served (``1 <= watermark <= capacity``).
        seed: seed of the buffer's random generator.
        max_sample_reuse: reservoir only: draws after which a sample leaves the buffer.
        sample_to_insert_ratio: reservoir only: target draws per inserted sample; builds
            a :class:`RateLimiter` with ``min_size_to_sample=watermark``.
        sample_to_insert_tolerance: allowed deviation, in samples. Defaults to
            ``ratio + capacity``, which keeps reads of any size ``<= capacity`` live;
            an explicit value should be ``>= ratio + (largest batch size)``.
        retain: FIFO/FIRO: keep served samples for :meth:`Buffer.rewind` (memory
            grows with the data served: it is not bounded by ``capacity``).

    Raises:
        ValueError: unknown kind, inconsistent sizes, or an option that does not apply
            to the kind (the message says why).
    """
    if not isinstance(kind, str) or kind.lower() not in BUFFER_KINDS:
        raise ValueError(
            f"unknown buffer kind {kind!r}; choose one of "
            f"{', '.join(repr(k) for k in BUFFER_KINDS)}"
        )
    kind = kind.lower()
    capacity = as_count("buffer capacity", capacity, 1)
    watermark = as_count("buffer watermark", watermark, 1)
    if watermark > capacity:
        raise ValueError(
            f"buffer watermark ({watermark}) must be <= capacity ({capacity}): training "
            "would wait for more samples than the buffer can hold"
        )
    if kind != "reservoir":
        if sample_to_insert_ratio is not None or sample_to_insert_tolerance is not None:
            raise ValueError(
                f"sample_to_insert_ratio/tolerance do not apply to a {kind!r} buffer: FIFO and "
                "FIRO serve each sample exactly once, so the ratio is always 1; a "
                "sample-to-insert ratio only makes sense for 'reservoir'"
            )
        if max_sample_reuse is not None:
            raise ValueError(
                f"max_sample_reuse does not apply to a {kind!r} buffer: FIFO and FIRO serve "
                "each sample exactly once; use 'reservoir' to re-draw samples"
            )
        return BUFFER_KINDS[kind](capacity, watermark, seed=seed, retain=retain)

    limiter = None
    if sample_to_insert_ratio is not None:
        ratio = float(sample_to_insert_ratio)
        if not ratio > 0:
            raise ValueError(f"sample_to_insert_ratio must be > 0, got {sample_to_insert_ratio!r}")
        if max_sample_reuse is not None and ratio > max_sample_reuse:
            raise ValueError(
                f"sample_to_insert_ratio ({ratio}) cannot exceed max_sample_reuse "
                f"({max_sample_reuse}): samples would leave before the ratio could be met"
            )
        tolerance = (
            ratio + capacity
            if sample_to_insert_tolerance is None
            else float(sample_to_insert_tolerance)
        )
        limiter = RateLimiter(ratio, tolerance, min_size_to_sample=watermark)
    elif sample_to_insert_tolerance is not None:
        raise ValueError("sample_to_insert_tolerance needs sample_to_insert_ratio")
    return ReservoirBuffer(
        capacity,
        watermark,
        seed=seed,
        rate_limiter=limiter,
        retain=retain,
        max_sample_reuse=max_sample_reuse,
    )
