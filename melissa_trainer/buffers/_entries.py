"""The samples of a snapshot as resharding sees them: read when needed, found by content.

An `Entry` is one sample of an old rank's snapshot with what travels with it (its age,
its draw count); its arrays are read from the snapshot only when asked for (a
`_state.LazyArrays` reads them from the file then), so a new rank reads the samples of
its own share and not the others'. An `Index` finds the held entry of a sample taken
into a pending batch, by content: the value of one small field narrows (reading it
does not read the large fields), then a full comparison decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import Sample

__all__ = ["Entry", "Index", "entries_by_prefix"]

#: fields of at most this many bytes are part of a sample's key
SMALL = 64


class Entry:
    """One sample and what travels with it; `sample` reads its arrays once."""

    __slots__ = ("age", "draws", "_arrays", "_fields", "_sample")

    def __init__(
        self,
        age: int,
        draws: int = 0,
        *,
        sample: Sample | None = None,
        arrays: Mapping[str, np.ndarray] | None = None,
        fields: list[tuple[str, str]] | None = None,
    ) -> None:
        self.age = age  # inserts on its rank between its insertion and the snapshot
        self.draws = draws  # reservoir draw count
        self._sample = sample
        self._arrays: Mapping[str, np.ndarray] = arrays if arrays is not None else sample or {}
        #: (field name, array key) of each field, in the sample's order
        self._fields = fields if fields is not None else [(n, n) for n in sample or {}]

    @property
    def sample(self) -> Sample:
        if self._sample is None:
            self._sample = {name: self._arrays[key] for name, key in self._fields}
        return self._sample

    def array(self, name: str) -> np.ndarray | None:
        """Field `name` alone (read from the snapshot if not read yet), None if absent."""
        if self._sample is not None:
            return self._sample.get(name)
        for field, key in self._fields:
            if field == name:
                return self._arrays[key]
        return None


def entries_by_prefix(
    arrays: Mapping[str, np.ndarray], order: Any
) -> dict[str, list[tuple[str, str]]]:
    """Sample prefix -> (field, array key) of its fields, in `order` (the snapshot's
    ``field_order``; those it lacks after them), from the keys alone.

    Raises:
        ValueError: an array key without ``/``, or a malformed `order`.
    """
    if order is not None and (
        not isinstance(order, list) or not all(isinstance(k, str) for k in order)
    ):
        raise ValueError("malformed buffer state: 'field_order' must be a list of names")
    rank = {name: i for i, name in enumerate(order or [])}
    out: dict[str, list[tuple[str, str]]] = {}
    for key in arrays:
        prefix, sep, name = key.partition("/")
        if not sep:
            raise ValueError(f"malformed buffer state: array key {key!r} has no '/'")
        out.setdefault(prefix, []).append((name, key))
    last = len(rank)
    for fields in out.values():
        fields.sort(key=lambda f: rank.get(f[0], last))  # stable: the rest as met
    return out


class Index:
    """The entries that may hold the samples `probes`, found by content.

    One field narrows the search: among the probes' fields of at most `SMALL` bytes,
    the one with the most distinct values (a stream's ``time_step``, say); only that
    field of each entry is read, then candidates are compared whole. Candidates are
    tried in entry order (a deterministic choice among equal contents).
    """

    def __init__(self, entries: list[Entry], probes: list[Sample], drawn_only: bool = False):
        self._entries = entries
        self._field = _discriminating(probes)
        self._by_key: dict[bytes | None, list[int]] = {}
        field = self._field
        for j, e in enumerate(entries):
            if not drawn_only or e.draws > 0:
                key = None if field is None else self._key(e.array(field))
                self._by_key.setdefault(key, []).append(j)

    def _key(self, array: np.ndarray | None) -> bytes | None:
        if self._field is None or array is None:
            return None
        return f"{array.dtype.str}{array.shape}".encode() + np.ascontiguousarray(array).tobytes()

    def find(self, sample: Sample) -> int | None:
        """The index of an entry holding `sample`'s content, or None."""
        key = self._key(sample.get(self._field)) if self._field is not None else None
        for j in self._by_key.get(key, ()):
            if _same(self._entries[j].sample, sample):
                return j
        return None

    def remove(self, sample: Sample, j: int) -> None:
        key = self._key(sample.get(self._field)) if self._field is not None else None
        self._by_key[key].remove(j)

    def pop(self, sample: Sample) -> int | None:
        j = self.find(sample)
        if j is not None:
            self.remove(sample, j)
        return j


def _discriminating(probes: list[Sample]) -> str | None:
    """The small field of `probes` with the most distinct values (None: no small field
    common to all)."""
    common = set(probes[0]) if probes else set()
    for p in probes[1:]:
        common &= p.keys()
    best: tuple[int, str] | None = None
    for name in sorted(common):
        values = [p[name] for p in probes]
        if any(v.nbytes > SMALL for v in values):
            continue
        distinct = len({(v.dtype.str, v.shape, v.tobytes()) for v in values})
        if best is None or distinct > best[0]:
            best = (distinct, name)
    return None if best is None else best[1]


def _same(a: Sample, b: Sample) -> bool:
    return a.keys() == b.keys() and all(
        a[f].dtype == b[f].dtype and np.array_equal(a[f], b[f]) for f in a
    )
