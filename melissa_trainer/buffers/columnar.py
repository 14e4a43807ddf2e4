"""`ColumnarReservoirBuffer`: a reservoir whose samples are rows of one array per field.

The plain `ReservoirBuffer` holds each sample as the dict that was put, so a columnar
read (`get_block`, the trainer's batch path) stacks the drawn samples field by field,
and a receiver's `SampleBlock` is split into per-sample dicts (one copy and one dict per
sample) on its way in. This reservoir keeps the same policy (the same slots, seeded
draws, evictions, counters and checkpoint format: the index bookkeeping is
`ReservoirBuffer`'s, untouched) but stores sample ``slot`` at row ``slot`` of one
preallocated array per field, ``[capacity, *field shape]``, as offline training holds
its data set:

* a put copies the sample's arrays into its slot's row (a `SampleBlock` put: one
  scatter per field for the whole block, no per-sample dict);
* `get_block(n)` is one gather per field (``take`` of the drawn rows), under the lock
  (a later put may overwrite a row once its sample is evicted);
* `get_batch(n)` gathers the drawn rows as `get_block` does and returns per-sample
  dicts of views of that batch (`SampleBlock.views`: the caller owns the batch's
  arrays; a held row is overwritten when its sample leaves, a batch never is). A
  sample of a batch keeps its whole batch alive. Against the plain reservoir, a put
  builds no per-sample objects and an eviction frees none (the plain store frees a
  dict and four arrays there, long out of the caches), and a read hands out samples
  fresh in the caches, for one copy of the rows more per read: it pays for rows of a
  few KiB (issue 42: a 1 KB field streamed beside training), not for large ones,
  whose copy is the cost (`max_row_bytes` keeps those plain).

The columns are allocated at the first sample, from its fields (names, in order,
shapes and dtypes): ``numpy.empty``, so memory is touched only as rows are filled. A
later sample that differs (another field, shape or dtype, or a value that is not a
numpy array) turns the buffer into a plain reservoir for good: every held row becomes
a dict of copies, and the buffer carries on exactly as `ReservoirBuffer` (nothing is
refused). So does an allocation of the columns that the system refuses (``MemoryError``:
`capacity` rows at once beyond an overcommit limit), where the plain store, which grows
sample by sample, may still do, and a first sample whose row (all its fields) holds
more than `max_row_bytes` (said at debug level only: a choice, not a fallback).
Thread-safety, blocking and closing: `Buffer`'s contract.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.buffers._common import BufferClosedError
from melissa_trainer.common.checks import as_count

from ._common import Sample
from .block import SampleBlock
from .reservoir import ReservoirBuffer

__all__ = ["SAMPLE_READS_MAX_ROW_BYTES", "ColumnarReservoirBuffer"]

logger = logging.getLogger(__name__)

#: how the columns are allocated (a name of this module's, so that a test can refuse it)
_empty = np.empty

#: `max_row_bytes` for a reader of samples (`get_batch`): below it, a read's gather and
#: views cost less than the per-sample objects of the plain store (the put's dict and
#: arrays, the eviction's frees, the reader's misses on them); above it the copy of the
#: rows is the cost, and a plain store hands its samples out without one
SAMPLE_READS_MAX_ROW_BYTES = 64 << 10


class _Row(dict[str, np.ndarray]):
    """A held sample: views of its slot's row in each column (never handed out)."""

    __slots__ = ("slot",)
    slot: int


Layout = tuple[tuple[str, tuple[int, ...], np.dtype], ...]


class ColumnarReservoirBuffer(ReservoirBuffer):
    """`ReservoirBuffer` with its samples stored by column (see the module docstring);
    the same constructor and contract, the same draws for the same seed and puts.

    Args:
        max_row_bytes: keyword only: a first sample whose fields hold more bytes than
            this makes the buffer plain from the start (None: no bound).
    """

    def __init__(self, *args: Any, max_row_bytes: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_row_bytes = (
            None if max_row_bytes is None else as_count("max_row_bytes", max_row_bytes, 1)
        )
        self._layout: Layout | None = None  # (name, shape, dtype) per field, in order
        self._columns: dict[str, np.ndarray] = {}
        self._filled: list[tuple[str, np.ndarray]] = []  # the columns a put copies into
        self._row_views: list[_Row | None] = []  # per slot, made at its first store
        self._plain = False  # a sample that did not fit: a plain reservoir from then on
        self._why_plain: str | None = None  # why the columns were refused, for the log
        self._chosen_plain = False  # refused by `max_row_bytes`: a choice, logged at debug

    @property
    def columnar(self) -> bool:
        """True while the samples are stored by column (False after a sample that did
        not fit the first one's layout, or before the first sample)."""
        with self._lock:
            return not self._plain and self._layout is not None

    # ------------------------------------------------------------------ storing rows
    @staticmethod
    def _layout_of(sample: Sample) -> Layout | None:
        if not isinstance(sample, dict):
            return None
        out = []
        for name, value in sample.items():
            if not isinstance(name, str) or not isinstance(value, np.ndarray):
                return None
            out.append((name, value.shape, value.dtype))
        return tuple(out) if out else None

    def _fits(self, sample: Sample) -> bool:
        """Whether `sample` has the columns' layout, allocating them at the first."""
        layout = self._layout
        if layout is None:
            first = self._layout_of(sample)
            if first is None:
                return False
            return self._allocate(first)
        if not isinstance(sample, dict) or len(sample) != len(layout):
            return False
        for (name, shape, dtype), (key, value) in zip(layout, sample.items(), strict=True):
            if (
                key != name
                or type(value) is not np.ndarray
                or value.shape != shape
                or value.dtype != dtype
            ):
                return False
        return True

    def _fits_block(self, layout: Layout) -> bool:
        """Whether a block's rows, of `layout` (`_block_layout`), have the columns'
        (allocating them first)."""
        if self._layout is None and not self._allocate(layout):
            return False
        return layout == self._layout

    def _allocate(self, layout: Layout) -> bool:
        """The columns (``numpy.empty``: pages are touched as rows are written); False
        when the system refuses `capacity` rows at once (an overcommit limit), where the
        plain store, which grows sample by sample, may still do, or when a row holds
        more than `max_row_bytes`."""
        row_bytes = sum(int(np.prod(s)) * d.itemsize for _, s, d in layout)
        bound = self._max_row_bytes
        if bound is not None and row_bytes > bound:
            self._why_plain = f"rows of {row_bytes} bytes, above max_row_bytes={bound}"
            self._chosen_plain = True
            return False
        try:
            columns = {n: _empty((self._capacity, *s), d) for n, s, d in layout}
        except MemoryError as exc:
            self._why_plain = f"the system refused {self._capacity} rows at once ({exc})"
            return False
        self._layout, self._columns = layout, columns
        # a put copies into the columns that hold bytes (a field of no elements, such
        # as a client's empty parameters, costs a call and copies nothing)
        self._filled = [(n, c) for n, c in columns.items() if c.size]
        self._row_views = [None] * self._capacity
        return True

    def _row(self, slot: int) -> _Row:
        row = self._row_views[slot]
        if row is None:
            row = _Row({n: c[slot, ...] for n, c in self._columns.items()})
            row.slot = slot
            self._row_views[slot] = row
        return row

    def _store(self, slot: int, sample: Sample) -> None:
        """Copy `sample` (already in ``_slots[slot]``) into its row (lock held); a
        sample that does not fit turns the buffer plain (`_to_plain`)."""
        if self._plain:
            return
        layout = self._layout
        if layout is None and not self._fits(sample):
            self._to_plain()
            return
        assert self._layout is not None
        if not isinstance(sample, dict) or len(sample) != len(self._layout):
            self._to_plain()
            return
        row = self._row_views[slot] or self._row(slot)
        # checked and copied field by field: a misfit found half way leaves this slot's
        # row half written, which nothing reads (``_slots[slot]`` holds the sample itself)
        for (name, shape, dtype), (key, value), dst in zip(
            self._layout, sample.items(), row.values(), strict=True
        ):
            if (
                key != name
                or type(value) is not np.ndarray
                or value.shape != shape
                or value.dtype != dtype
            ):
                self._to_plain()
                return
            dst[...] = value
        self._slots[slot] = row

    def _to_plain(self) -> None:
        """Every held row as a dict of copies; no columns from now on (lock held). Said
        once in the log: the store goes on, slower per batch, and the user should know."""
        self._plain = True
        logger.log(
            logging.DEBUG if self._chosen_plain else logging.INFO,
            "reservoir: samples kept one by one from now on, not by column (%s)",
            self._why_plain or "a sample whose fields differ from the first one's",
        )
        for slot, sample in enumerate(self._slots):
            if type(sample) is _Row:
                self._slots[slot] = {k: v.copy() for k, v in sample.items()}
        self._columns, self._filled, self._row_views = {}, [], []

    def _insert(self, sample: Sample, insert_id: int) -> None:
        super()._insert(sample, insert_id)
        self._store(self._undrawn[-1], sample)  # the slot `_insert` filled: the last

    def _evict_for(self, samples: Sequence[Sample]) -> None:
        super()._evict_for(samples)
        if samples:  # each eviction appended its slot to `_undrawn`, in order
            for slot, sample in zip(self._undrawn[-len(samples) :], samples, strict=True):
                self._store(slot, sample)

    def put_available(self, samples: Sequence[Sample]) -> int:
        """`Buffer.put_available`; a `SampleBlock` whose fields fit the columns goes in
        with one scatter per field (the same slots, draws and counters, the rate
        limiter's too, as its samples one by one; and no per-sample object, even for
        the part a limiter holds back)."""
        if type(samples) is not SampleBlock or not len(samples):
            return super().put_available(samples)
        fields = samples.fields
        layout = _block_layout(fields)  # (outside the lock: the block is the caller's)
        with self._lock:
            if not self._plain and self._fits_block(layout):
                if self._closed:
                    raise BufferClosedError(
                        "put_available() on a closed buffer (reception has ended)"
                    )
                room = self._capacity - self._size()  # inserts without an eviction
                n = min(len(samples), room + len(self._drawn))
                lim = self._limiter
                if lim is not None:  # as `Buffer.put_available` asks it, sample by sample
                    allowed = 0
                    while allowed < n and (self._n_size_blocked or lim.can_insert()):
                        lim.inserts += 1
                        allowed += 1
                    n = allowed
                fill = min(n, room)
                slots = self._insert_slots(fill)  # the bookkeeping only: rows come after
                if n > fill:  # (a victim's `_slots` entry stays its slot's row: the same)
                    slots += self._evict_slots(n - fill)
                if n:
                    index = np.asarray(slots, dtype=np.intp)
                    for name, column in self._filled:
                        column[index] = fields[name][:n]
                    held, views = self._slots, self._row_views
                    for slot in slots[:fill]:  # (a slot's views are made once, then reused)
                        held[slot] = views[slot] or self._row(slot)
                    if self._size() >= self._wake_len:
                        self._readable.notify_all()
                return n
        # the block does not fit the columns: its samples one by one (`_store` decides)
        return super().put_available(samples)

    # ------------------------------------------------------------------ reading rows
    def _take(self, n: int) -> list[Sample]:
        return self._handed_out(super()._take(n))

    def _take_closed(self, n: int) -> list[Sample]:
        return self._handed_out(super()._take_closed(n))

    def _gather(self, rows: list[Sample]) -> SampleBlock:
        """The drawn `rows` (held `_Row`s, not empty) as one block of fresh arrays:
        one ``take`` per column (lock held: a later put may overwrite a row)."""
        index = np.fromiter((r.slot for r in rows), np.intp, len(rows))  # type: ignore[attr-defined]
        return SampleBlock({k: c.take(index, axis=0) for k, c in self._columns.items()})

    def _handed_out(self, rows: list[Sample]) -> list[Sample]:
        """What `get_batch` returns of the drawn `rows`: views of their gathered block
        (samples in columns), or the held dicts (plain: they are never modified)."""
        if self._plain or not rows:
            return [_own(s) for s in rows]
        return self._gather(rows).views()

    def get_batch(self, n: int, timeout: float | None = None) -> list[Sample]:
        """`Buffer.get_batch`: the same draws, gathered from the columns under the lock
        (one ``take`` per field), handed out as per-sample views of that gather, made
        outside the lock (a put waiting on it waits for the gather only)."""
        got = self.get_batch_or_block(n, timeout)
        return got.views() if isinstance(got, SampleBlock) else got

    def get_batch_or_block(
        self, n: int, timeout: float | None = None
    ) -> list[Sample] | SampleBlock:
        """`Buffer.get_batch_or_block`: while the samples are stored by column, the
        gathered block whose `SampleBlock.views` `get_batch` hands out; plain, the
        held dicts (as `get_batch`)."""
        with self._lock:
            n = self._wait_to_get(n, timeout)
            take = ReservoirBuffer._take_closed if self._closed else ReservoirBuffer._take
            rows = take(self, n)
            if not rows:
                return []
            self._count_got(len(rows))
            if self._plain:
                return [_own(s) for s in rows]
            return self._gather(rows)

    def get_block(self, n: int, timeout: float | None = None) -> SampleBlock:
        """`Buffer.get_block`: the same draws, gathered from the columns under the lock
        (one ``take`` per field) into arrays the caller owns."""
        with self._lock:
            n = self._wait_to_get(n, timeout)
            take = ReservoirBuffer._take_closed if self._closed else ReservoirBuffer._take
            rows = take(self, n)
            if not rows:
                return SampleBlock.empty()
            self._count_got(len(rows))
            if not self._plain:
                return self._gather(rows)
        # plain: the held dicts are never modified, so they stack outside the lock
        return SampleBlock.from_samples(rows)

    # ------------------------------------------------------------------ checkpoints
    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        meta = super()._contents_state(arrays)
        if not self._plain:  # rows are overwritten later: the snapshot owns copies
            for key, value in arrays.items():
                if value.base is not None:
                    arrays[key] = value.copy()
        return meta

    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        super()._load_contents(samples, meta)
        self._layout, self._columns, self._row_views, self._plain = None, {}, [], False
        self._filled = []
        self._why_plain, self._chosen_plain = None, False
        for slot in sorted(self._undrawn + self._drawn):
            sample = self._slots[slot]
            assert sample is not None
            self._store(slot, sample)


def _block_layout(fields: dict[str, np.ndarray]) -> Layout:
    """The layout of a block's rows: (name, row shape, dtype) per field, in order."""
    return tuple((k, v.shape[1:], v.dtype) for k, v in fields.items())


def _own(sample: Sample) -> Sample:
    """A held row as a dict of copies (a plain dict as is: it is never modified)."""
    if type(sample) is _Row:
        return {k: v.copy() for k, v in sample.items()}
    return sample
