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

A :class:`BufferConfig` describes a buffer, validated in one place; :func:`make_buffer`
builds it (``TrainingArguments.buffer_config()`` gives the trainer's).

:func:`read_snapshot` reads a saved snapshot back; ``buffers.reshard.share`` deals the
snapshots of k ranks over m (resuming on another number of ranks).
"""

from __future__ import annotations

from typing import Any

from ._common import BufferClosedError, BufferStats, Sample
from ._entries import ShareTooSmall
from ._state import ARRAYS_FILE, META_FILE
from .base import Buffer
from .block import SampleBlock
from .columnar import ColumnarReservoirBuffer
from .config import BUFFER_KINDS, BufferConfig
from .fifo import FIFOBuffer, FIROBuffer
from .rate_limiter import RateLimiter
from .reservoir import ReservoirBuffer
from .reshard import read_snapshot

#: the files a buffer's `save` writes into its directory, in the order `load` reads them
STATE_FILES = (ARRAYS_FILE, META_FILE)

__all__ = [
    "ARRAYS_FILE",
    "META_FILE",
    "STATE_FILES",
    "BUFFER_CLASSES",
    "BUFFER_KINDS",
    "Buffer",
    "BufferConfig",
    "BufferClosedError",
    "BufferStats",
    "ColumnarReservoirBuffer",
    "FIFOBuffer",
    "FIROBuffer",
    "RateLimiter",
    "ReservoirBuffer",
    "Sample",
    "SampleBlock",
    "ShareTooSmall",
    "make_buffer",
    "read_snapshot",
]

#: buffer kind -> class, as `make_buffer` builds them.
BUFFER_CLASSES: dict[str, type[Buffer]] = {
    "fifo": FIFOBuffer,
    "firo": FIROBuffer,
    "reservoir": ReservoirBuffer,
}


def make_buffer(
    config: BufferConfig, *, columnar: bool = False, max_row_bytes: int | None = None
) -> Buffer:
    """Build the buffer `config` describes (already validated by `BufferConfig`).

    `columnar`: a reservoir stores its samples by column (`ColumnarReservoirBuffer`:
    the same draws, no per-sample object held, one gather per read); ignored by
    FIFO/FIRO. `max_row_bytes`: the columnar reservoir's bound on a row (larger samples
    are held plain, see `ColumnarReservoirBuffer`); None: no bound.

    Raises:
        TypeError: `config` is not a `BufferConfig` (e.g. the former
            ``make_buffer(kind, capacity, ...)``).

    A ``sample_to_insert_ratio`` gives a reservoir a :class:`RateLimiter` with
    ``min_size_to_sample=watermark`` and the tolerance `BufferConfig.resolved_tolerance`.
    """
    if not isinstance(config, BufferConfig):
        raise TypeError(
            f"make_buffer takes a BufferConfig, got {type(config).__name__}: write "
            "make_buffer(BufferConfig('fifo', capacity, watermark, ...))"
        )
    cls = BUFFER_CLASSES[config.kind]
    tolerance = config.resolved_tolerance
    if cls is not ReservoirBuffer:
        return cls(config.capacity, config.watermark, seed=config.seed, retain=config.retain)
    limiter = None
    if config.sample_to_insert_ratio is not None and tolerance is not None:
        limiter = RateLimiter(
            config.sample_to_insert_ratio, tolerance, min_size_to_sample=config.watermark
        )
    kwargs: dict[str, Any] = {"max_row_bytes": max_row_bytes} if columnar else {}
    return (ColumnarReservoirBuffer if columnar else ReservoirBuffer)(
        config.capacity,
        config.watermark,
        seed=config.seed,
        rate_limiter=limiter,
        retain=config.retain,
        max_sample_reuse=config.max_sample_reuse,
        draw_choices=config.draw_choices,
        evict_choices=config.evict_choices,
        **kwargs,
    )
