"""`IterableSource`: the in-process source, a Python iterable (or a factory of one per
rank) advanced in the training thread by a rule that makes runs reproducible bit for
bit (see its docstring and docs/resume.md); `as_source`, what the trainer makes of its
``train_source``. Useful for tests and for simulators written in Python.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from melissa_trainer.buffers import Buffer, BufferClosedError, Sample
from melissa_trainer.sources.ingest_transform import IngestTransform, IngestTransformError
from melissa_trainer.sources.source import Source, SourceError
from melissa_trainer.sources.watermark_check import warn_unreachable_watermark

__all__ = ["IterableSource", "SampleFactory", "as_sample", "as_source"]

SampleFactory = Callable[[int, int], Iterable[Mapping[str, Any]]]


def as_sample(item: Any) -> Sample:
    """Convert one produced item to a `Sample` (a dict of numpy arrays), or raise TypeError."""
    if not isinstance(item, Mapping):
        raise TypeError(
            f"a source must produce mappings of field name -> array, got {type(item).__name__}"
        )
    return {str(k): np.asarray(v) for k, v in item.items()}


class IterableSource(Source):
    """Feeds the buffer from an iterable of samples, in the reader's thread.

    Args:
        data: an iterable of mappings (field name -> array-like), or a factory
            `data(rank, world_size)` returning one, so that each rank gets its own share.

    Determinism: the iterable is advanced only by `wait_for`, which the stream dataset
    calls before each read of the buffer, and `wait_for` fills the buffer by a rule that
    depends on nothing but the buffer's state (not on `n_samples` nor `timeout`): it
    inserts until the buffer would make a `put` wait (full; for a reservoir, once every
    held sample is undrawn; or the rate limiter holds inserts back), or the iterable is
    exhausted (the buffer is then closed). The buffer's contents at each random draw
    therefore do not depend on thread timing, and a run is reproducible bit for bit
    with any buffer (same seed, same iterable). The iterable is consumed on demand: no
    further than the buffer needs, and a slow iterable (a simulation step in Python)
    slows training by what it takes; for a concurrent producer, stream from
    simulations (`StreamSource`).

    Resume contract: when the buffer passed to `start` has already received `k`
    samples (restored from a checkpoint), the first `k` items of the iterable are
    skipped (iterated, then dropped: a generator recomputes them), so a deterministic
    iterable continues exactly where it stopped.

    If iterating raises (or an item is not a mapping, or the ingest transform raises),
    the buffer is closed and `wait_for` raises `SourceError` from it, now and at every
    later call.

    An ingest transform (`set_ingest_transform`) is applied to each item as it is taken
    from the iterable, in this thread (the reader's), once: the resume's skipped items
    are not transformed, and an item the buffer refused waits transformed.

    Not thread-safe: `start`, `wait_for`, `stop` from one thread (the reader's).
    """

    def __init__(self, data: Iterable[Mapping[str, Any]] | SampleFactory) -> None:
        self._data = data
        self._buffer: Buffer | None = None
        self._items: Iterator[Mapping[str, Any]] | None = None
        self._skip = 0
        self._held: Sample | None = None  # taken from the iterable, refused by the buffer
        self._done = False
        self._error: BaseException | None = None
        self._transform: IngestTransform | None = None

    def set_ingest_transform(self, transform: IngestTransform) -> None:
        """Transform each item once, as it is taken from the iterable (class docstring)."""
        if self._buffer is not None:
            raise RuntimeError("IterableSource.set_ingest_transform() after start()")
        self._transform = transform

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        """Bind the iterable of this rank; nothing is produced before the first `wait_for`."""
        if self._buffer is not None:
            raise RuntimeError("IterableSource.start() was called twice")
        data = self._data(rank, world_size) if callable(self._data) else self._data
        warn_unreachable_watermark(data, buffer.watermark, rank, world_size)
        self._items = iter(data)
        self._skip = buffer.stats().put
        self._buffer = buffer

    def wait_for(self, n_samples: int, timeout: float) -> None:
        """Put samples into the buffer until it would make a `put` wait, or close it at
        the end of the iterable, whatever `n_samples` (see the determinism rule).

        Blocks for as long as the iterable takes to produce them, whatever `timeout`.
        With `timeout` > 0 (the reader found no servable read after the previous fill),
        a fill that puts nothing means that the reader and this producer wait for each
        other (a rate limiter whose tolerance is too small): `SourceError` says so
        rather than the reader waiting forever.

        Raises:
            SourceError: the iterable failed, produced something other than a mapping,
                or the buffer can neither be read nor filled (see above).
        """
        buffer, items = self._buffer, self._items
        if self._error is not None:
            raise self._failure() from self._error
        if buffer is None or items is None or self._done:
            return
        put, transform = 0, self._transform
        try:
            if self._skip:
                next(itertools.islice(items, self._skip, self._skip), None)
                self._skip = 0
            while True:
                if self._held is None:
                    sample = as_sample(next(items))
                    self._held = sample if transform is None else transform.sample(sample)
                if not buffer.try_put(self._held):
                    break
                self._held = None
                put += 1
        except StopIteration:
            self._done = True
            buffer.close()
            return
        except BufferClosedError:  # closed by the trainer: nothing more is wanted
            self._done = True
            return
        except Exception as exc:
            self._error = exc
            self._done = True
            buffer.close()
            raise self._failure() from exc
        if timeout > 0 and put == 0:
            raise SourceError(
                f"the buffer ({buffer!r}, {buffer.rate_limiter!r}) can neither serve the "
                "next read nor take a sample, and nothing else fills it: with a rate "
                "limiter, raise sample_to_insert_tolerance to at least "
                "sample_to_insert_ratio + batch_size (or leave it unset)"
            )

    def _failure(self) -> SourceError:
        error = self._error
        why = str(error) if isinstance(error, IngestTransformError) else repr(error)
        return SourceError(f"the sample source failed: {why}")

    def stop(self) -> None:
        """Stop producing (idempotent; there is no thread to wait for)."""
        self._done = True
        self._held = None


def as_source(obj: Source | Iterable[Mapping[str, Any]] | SampleFactory) -> Source:
    """Accept a `Source`, an iterable of samples or a per-rank factory of one."""
    if isinstance(obj, Source):
        return obj
    if callable(obj) or isinstance(obj, Iterable):
        return IterableSource(obj)
    raise TypeError(
        "train_source must be a melissa_trainer Source, an iterable of samples, or a "
        f"callable (rank, world_size) -> iterable; got {type(obj).__name__}"
    )
