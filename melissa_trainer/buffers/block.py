"""`SampleBlock`: consecutive samples stored by column, one array per field.

A receiver turns a BATCH of small fields (e.g. 64 time steps of a 1 KB field) into
samples; one Python dict and four arrays per sample cost more than the bytes they hold.
A block holds the same samples as one array per field, with the samples along the first
axis, so that a FIFO buffer can store them as one item and a reader that wants a
columnar batch (`Buffer.get_block`, the stream dataset's default path) gets it without
ever building the per-sample objects.

A block is also a `Sequence[Sample]`: indexing or iterating it materializes samples that
own their memory, exactly as the per-sample path builds them (see `samples`), so any
code written for lists of samples accepts a block. Slicing gives a block of views.

A block never modifies its arrays, and neither may its holders: a block taken from a
buffer (`Buffer.get_block`) owns fresh arrays; one given to a buffer is the buffer's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from ._common import Sample

__all__ = ["BlockViews", "SampleBlock"]

#: at most this many materialized samples share the copy of a block's small rows
SHARED_ROWS = 64
#: rows of at most this many bytes are materialized as views of a shared copy
SMALL_ROW_BYTES = 64


#: ``(i, ...)`` for i in 0, 1, ...: the index of a 1-D column's element as a 0-d array,
#: made once (replaced whole, never changed: a reader in another thread sees a prefix)
_AT: tuple[tuple[int, Any], ...] = ()


def _elements(column: np.ndarray, n: int) -> list[np.ndarray]:
    """The first `n` elements of the 1-D `column` as 0-d views: one ``__getitem__`` per
    element from C (`map`), a third cheaper than ``[column[i, ...] for i in ...]``."""
    global _AT
    if len(_AT) < n:
        _AT = tuple((i, ...) for i in range(max(n, 2 * len(_AT), 64)))
    return list(map(column.__getitem__, _AT[:n]))


def _dicts(keys: list[str], columns: list[list[Any]]) -> list[Sample]:
    """One dict per row of `columns` (one column per key, >= 1 key), keyed by `keys`.

    Materializing a block is the per-sample path of the FIRO and reservoir buffers: a
    dict display is faster than ``dict(zip(keys, row))`` (docs/measured.md, "Design
    choices, measured"), so up to four fields
    (a receiver's block has four: the field, ``simulation_id``, ``time_step``,
    ``parameters``) are one display per row; further fields are stored column by
    column, which costs one store per value.
    """
    if len(keys) == 1:
        (k0,), (c0,) = keys, columns
        return [{k0: v0} for v0 in c0]
    if len(keys) == 2:
        k0, k1 = keys
        return [{k0: v0, k1: v1} for v0, v1 in zip(*columns, strict=True)]
    if len(keys) == 3:
        k0, k1, k2 = keys
        return [{k0: v0, k1: v1, k2: v2} for v0, v1, v2 in zip(*columns, strict=True)]
    k0, k1, k2, k3 = keys[:4]
    out = [{k0: v0, k1: v1, k2: v2, k3: v3} for v0, v1, v2, v3 in zip(*columns[:4], strict=True)]
    for key, column in zip(keys[4:], columns[4:], strict=True):
        for sample, value in zip(out, column, strict=True):
            sample[key] = value
    return out


class BlockViews(list[Sample]):
    """The per-sample views of one block (`SampleBlock.views`), with that `block`: a
    reader that wants a column of the batch (the trainer's simulation ids, each step)
    takes it from the block instead of from each sample. `block` is the list's as it was
    made; a caller that changes the list (it is a plain list otherwise) must not use
    `block` for it (`column` checks the length only)."""

    __slots__ = ("block",)
    block: SampleBlock

    def column(self, name: str) -> np.ndarray | None:
        """The block's array of field `name` (one row per sample, in order: the samples'
        values, not a copy), or None when the list no longer has the block's length or
        the block has no such field."""
        block = self.block
        if len(self) != len(block):
            return None
        return block.fields.get(name)


class SampleBlock(Sequence[Sample]):
    """`len(self)` samples, field name -> array whose first axis is the sample.

    Args:
        fields: every array has the same length along axis 0 (0 for an empty block).

    Raises:
        ValueError: no field, a 0-d array, or lengths that differ (naming the field).
    """

    __slots__ = ("fields", "_n")

    def __init__(self, fields: Mapping[str, np.ndarray]) -> None:
        if not fields:
            raise ValueError("a SampleBlock needs at least one field")
        n = -1
        for name, array in fields.items():
            if not isinstance(array, np.ndarray) or array.ndim == 0:
                raise ValueError(
                    f"SampleBlock field {name!r} must be a numpy array with the samples "
                    f"along axis 0, got {type(array).__name__} of shape "
                    f"{getattr(array, 'shape', None)}"
                )
            if n < 0:
                n = len(array)
            elif len(array) != n:
                raise ValueError(
                    f"SampleBlock field {name!r} holds {len(array)} samples, the others {n}"
                )
        self.fields: dict[str, np.ndarray] = dict(fields)
        self._n = n

    @classmethod
    def empty(cls) -> SampleBlock:
        """A block of no sample (and no field): `Buffer.get_block`'s end of the stream,
        as ``[]`` is `Buffer.get_batch`'s. The only block without a field."""
        block = cls.__new__(cls)
        block.fields, block._n = {}, 0
        return block

    @classmethod
    def from_samples(cls, samples: Sequence[Sample]) -> SampleBlock:
        """Stack samples (dicts with the same fields, shapes and dtypes) into a block
        of fresh arrays.

        Raises:
            ValueError: no sample, or samples that disagree (naming the field).
        """
        if not samples:
            raise ValueError("a SampleBlock holds at least one sample")
        keys = list(samples[0])
        out: dict[str, np.ndarray] = {}
        for key in keys:
            try:
                column = [s[key] for s in samples]
                # np.array of a list of arrays: several times faster than np.stack
                stacked = np.array(column)
                if stacked.shape != (len(column), *np.shape(column[0])):
                    raise ValueError("shapes differ")
            except (KeyError, ValueError) as e:
                raise ValueError(
                    f"samples cannot be stacked into a block: field {key!r} is missing from "
                    f"some or differs in shape ({e})"
                ) from None
            out[key] = stacked
        if any(len(s) != len(keys) for s in samples):
            raise ValueError(f"samples cannot be stacked into a block: fields differ from {keys}")
        return cls(out)

    @classmethod
    def concat(cls, blocks: Sequence[SampleBlock]) -> SampleBlock:
        """One block of fresh arrays holding `blocks` in order (same fields)."""
        first = blocks[0].fields
        if any(b.fields.keys() != first.keys() for b in blocks):
            raise ValueError(f"blocks with different fields cannot be joined: {list(first)}")
        return cls({k: np.concatenate([b.fields[k] for b in blocks]) for k in first})

    @classmethod
    def join(cls, items: Sequence[Sample | SampleBlock]) -> SampleBlock:
        """One block of fresh arrays holding `items` (samples and blocks) in order:
        runs of samples are stacked, blocks copied; the result shares no memory with
        `items`."""
        parts: list[SampleBlock] = []
        loose: list[Sample] = []
        for item in items:
            if type(item) is SampleBlock:
                if loose:
                    parts.append(cls.from_samples(loose))
                    loose = []
                parts.append(item)
            else:
                loose.append(item)  # type: ignore[arg-type]
        if loose:
            if not parts:
                return cls.from_samples(loose)  # fresh arrays already
            parts.append(cls.from_samples(loose))
        return cls.concat(parts)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> SampleBlock: ...

    def __getitem__(self, index: int | slice) -> Sample | SampleBlock:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step != 1:
                raise ValueError("a SampleBlock slice takes consecutive samples (step 1)")
            stop = max(start, stop)  # an empty slice is an empty block
            if start == 0 and stop == self._n:
                return self
            return SampleBlock({k: v[start:stop] for k, v in self.fields.items()})
        i = index.__index__()
        if not -self._n <= i < self._n:
            raise IndexError(f"sample {index} of a SampleBlock of {self._n}")
        # ``v[i, ...]``: a 1-D column's element as a 0-d array, as `samples` gives it (a
        # numpy scalar is not an array: a buffer's snapshot refuses it)
        return {k: v[i, ...].copy() for k, v in self.fields.items()}

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples())

    def samples(self) -> list[Sample]:
        """The samples as dicts, each owning its memory.

        Rows larger than `SMALL_ROW_BYTES` are copied one by one (a view would keep the
        whole block alive while one sample stays in a buffer); smaller rows (scalars as
        0-d arrays, short parameter vectors) are views of a copy shared by at most
        `SHARED_ROWS` samples: one allocation per group instead of one per sample, and
        a sample kept alone pins a few hundred bytes at most.
        """
        out: list[Sample] = []
        fields = self.fields
        keys = list(fields)
        small = [k for k, v in fields.items() if v[:1].nbytes <= SMALL_ROW_BYTES]
        for lo in range(0, self._n, SHARED_ROWS):
            hi = min(lo + SHARED_ROWS, self._n)
            columns = []
            for k in keys:
                rows = fields[k][lo:hi]
                if k not in small:
                    columns.append([row.copy() for row in rows])
                elif rows.ndim == 1:  # 0-d views
                    columns.append(_elements(rows.copy(), hi - lo))
                else:
                    columns.append(list(rows.copy()))
            out += _dicts(keys, columns)
        return out

    def views(self) -> BlockViews:
        """The samples as dicts of views of the block's arrays: no copy, and one dict
        and one view per field and sample, against `samples`' copies. Every sample keeps
        the whole block alive: for a block read whole, such as a batch gathered for its
        reader (`ColumnarReservoirBuffer.get_batch`); `samples` gives samples that own
        their memory. A 1-D column's element is a 0-d array, as in `samples`. The list
        keeps this block (`BlockViews.block`). A field of no elements (a receiver's empty
        ``parameters``) is one view of its first row, shared by every sample: it holds
        no value to differ or to write, and 64 arrays fewer a batch of 64."""
        n = self._n
        out = BlockViews()
        out.block = self
        if n:
            columns = [
                _elements(v, n) if v.ndim == 1 else [v[0]] * n if not v.size else list(v)
                for v in self.fields.values()
            ]
            out += _dicts(list(self.fields), columns)
        return out

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {v.dtype}{list(v.shape[1:])}" for k, v in self.fields.items())
        return f"SampleBlock({self._n} samples; {shapes})"
