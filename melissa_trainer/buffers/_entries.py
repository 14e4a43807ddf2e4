"""The samples of a snapshot as resharding sees them: read when needed, found by content.

An `Entry` is one sample of an old rank's snapshot with what travels with it (its age,
its draw count); its arrays are read from the snapshot only when asked for (a
`_state.LazyArrays` reads them from the file then), so a new rank reads the samples of
its own share and not the others'. An `Index` finds the held entry of a sample taken
into a pending batch, by content: the values of the small fields narrow, then a full
comparison decides. `put_back` undoes a reservoir's pending batches (their draws given
back, the pending samples its buffer no longer holds held again); `evict_to` cuts a
reservoir share to its capacity, after `check_undrawn` (`ShareTooSmall`) made sure that its
never-drawn samples fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _state
from ._common import Sample

__all__ = [
    "Entry",
    "Index",
    "Items",
    "ShareTooSmall",
    "check_undrawn",
    "evict_to",
    "field_names",
    "put_back",
]

#: fields of at most this many bytes are part of a sample's key
SMALL = 64


class Entry:
    """One sample and what travels with it; `sample` reads its arrays once.

    A sample of a snapshot is named by its `prefix` (``s3``: arrays ``s3/{field}``),
    its fields looked up in `names` (the snapshot's ``field_order``, which names every
    field of every sample, in order) when it is read; an in-memory one (a pending
    sample) is given as `sample`.
    """

    __slots__ = ("age", "draws", "_arrays", "_prefix", "_names", "_sample")

    def __init__(
        self,
        age: int,
        draws: int = 0,
        *,
        sample: Sample | None = None,
        arrays: Mapping[str, np.ndarray] | None = None,
        prefix: str = "",
        names: Sequence[str] = (),
    ) -> None:
        self.age = age  # inserts on its rank between its insertion and the snapshot
        self.draws = draws  # reservoir draw count
        self._sample = sample
        self._arrays = arrays
        self._prefix = prefix
        self._names = names

    @property
    def sample(self) -> Sample:
        if self._sample is None:
            arrays, prefix = self._arrays, self._prefix
            assert arrays is not None  # (a sample given at construction otherwise)
            sample = {}
            for name in self._names:
                try:  # (a field of another sample's may be absent from this one)
                    sample[name] = arrays[f"{prefix}/{name}"]
                except KeyError:
                    continue
            self._sample = sample
        return self._sample

    def field(self, name: str) -> np.ndarray | None:
        """One field of the sample (None: it has none), read alone unless the whole
        sample was read already: what an `Index` narrows on."""
        if self._sample is not None:
            return self._sample.get(name)
        assert self._arrays is not None  # (a sample given at construction otherwise)
        try:
            return self._arrays[f"{self._prefix}/{name}"]
        except KeyError:
            return None

    def encode(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Add the sample's fields to a snapshot's `arrays` as ``"{prefix}/{field}"``.
        A sample of a snapshot is stored as read (a snapshot's arrays are checked
        when written); a pending one is checked (`_state.encode_sample`)."""
        if self._arrays is None:
            _state.encode_sample(arrays, prefix, self.sample)
            return
        for name, value in self.sample.items():
            arrays[f"{prefix}/{name}"] = value


@dataclass
class Items:
    """Samples of one old rank, not read yet: each a prefix in `arrays` (or a pending
    sample), with its age and draw count; `entry` makes the `Entry` of one."""

    arrays: Mapping[str, np.ndarray]
    names: list[str]
    items: list[str | Sample] = field(default_factory=list)
    ages: list[int] = field(default_factory=list)
    draws: list[int] = field(default_factory=list)

    def entry(self, j: int) -> Entry:
        item = self.items[j]
        if isinstance(item, str):
            return Entry(
                self.ages[j], self.draws[j], arrays=self.arrays, prefix=item, names=self.names
            )
        return Entry(self.ages[j], self.draws[j], sample=item)

    def entries(self) -> list[Entry]:
        return [self.entry(j) for j in range(len(self.items))]


def field_names(arrays: Mapping[str, np.ndarray], order: Any) -> list[str]:
    """Every field name of a snapshot's samples, in order: its ``field_order`` (which
    `Buffer.state_dict` writes: every field, as first met), or, without one, the
    names of its array keys as first met (which reads every key, not the arrays).

    Raises:
        ValueError: a malformed `order`, or an array key without ``/``.
    """
    if order is not None:
        if not isinstance(order, list) or not all(isinstance(k, str) for k in order):
            raise ValueError("malformed buffer state: 'field_order' must be a list of names")
        return order
    names: dict[str, None] = {}
    for key in arrays:
        _, sep, name = key.partition("/")
        if not sep:
            raise ValueError(f"malformed buffer state: array key {key!r} has no '/'")
        names[name] = None
    return list(names)


class Index:
    """The entries that may hold the samples `probes`, found by content.

    The small fields (at most `SMALL` bytes) common to every probe narrow the search (a
    stream's ``simulation_id``, ``time_step`` and ``parameters`` tell its samples
    apart): only those fields of the entries are read to build the index; a candidate
    whose key matches a probe's is then read and compared whole. Without such a field
    every entry is a candidate (correct, and then reads each entry tried whole).
    Candidates are tried in entry order (a deterministic choice among equal contents).
    """

    def __init__(self, entries: list[Entry], probes: list[Sample], drawn_only: bool = False):
        self._entries = entries
        common = set(probes[0]) if probes else set()
        for p in probes[1:]:
            common &= p.keys()
        self._fields = sorted(n for n in common if all(p[n].nbytes <= SMALL for p in probes))
        self._by_key: dict[tuple[bytes | None, ...], list[int]] = {}
        for j, e in enumerate(entries):
            if not drawn_only or e.draws > 0:
                key = tuple(_bytes(e.field(n)) for n in self._fields)
                self._by_key.setdefault(key, []).append(j)

    def _key(self, sample: Sample) -> tuple[bytes | None, ...]:
        return tuple(_bytes(sample.get(n)) for n in self._fields)

    def find(self, sample: Sample) -> int | None:
        """The index of an entry holding `sample`'s content, or None."""
        for j in self._by_key.get(self._key(sample), ()):
            if _same(self._entries[j].sample, sample):
                return j
        return None

    def remove(self, sample: Sample, j: int) -> None:
        self._by_key[self._key(sample)].remove(j)

    def pop(self, sample: Sample) -> int | None:
        j = self.find(sample)
        if j is not None:
            self.remove(sample, j)
        return j


def put_back(
    held: Items, counters: dict[str, int], hist: dict[int, int], batches: Sequence[Sequence[Sample]]
) -> None:
    """Undo a reservoir rank's pending batches on its own samples: each draw a pending
    batch took is given back to the held sample it drew (its draw count less one,
    undrawn again at zero), and each pending sample that the buffer no longer holds
    (evicted, or removed at ``max_sample_reuse``, after its draw) is held again,
    undrawn: once per content, in batch and position order, at the end of `held`, aged
    as the rank's oldest held sample (its insert id left with it). Its departure is
    undone: ``evicted`` less one, and one less in the lowest histogram bucket of at
    least its draws in the pending batches (the bucket it left in was not kept: exact
    when it had no draw before them). Which held sample a pending one is, is decided by
    `Index`: the small fields of the rank's drawn samples (then, for a content not
    among them, of all its held samples), then the candidates whole. A pending sample
    was drawn from its own rank's buffer, so it is looked for there only: the draw
    counts are final before the samples are dealt (what `share` counts to refuse, on
    every new rank alike, a share of more never-drawn samples than the capacity).

    Raises:
        ValueError: a pending sample neither held nor counted as having left.
    """
    taken = [s for batch in batches for s in batch]
    if not taken:
        return
    entries = held.entries()
    # A pending sample still held was drawn (its draw is pending): look among the drawn
    # first, a fraction of a full reservoir's samples (the 1 GB resize benchmark's
    # load time doubled when every held sample was indexed); then, for one not found
    # there, among them all (a rewind resets draw counts: held, nothing to give back).
    drawn_at = [j for j, e in enumerate(entries) if e.draws > 0]
    drawn = Index([entries[j] for j in drawn_at], taken)
    every: Index | None = None
    gone: dict[tuple[Any, ...], tuple[Sample, int]] = {}  # content -> (sample, draws)
    for sample in taken:
        key = _content_key(sample)
        if key in gone:
            gone[key] = (gone[key][0], gone[key][1] + 1)
            continue
        i = drawn.find(sample)
        if i is not None:  # held: its draw given back (undrawn again at zero)
            j = drawn_at[i]
            held.draws[j] -= 1
            if held.draws[j] == 0:
                drawn.remove(sample, i)
            continue
        every = every or Index(entries, taken)
        if every.find(sample) is None:
            gone[key] = (sample, 1)
    if not gone:
        return
    if counters["evicted"] < len(gone):
        raise ValueError(
            f"malformed buffer snapshot: {len(gone)} pending samples are not held, but "
            f"only {counters['evicted']} samples left the buffer"
        )
    counters["evicted"] -= len(gone)
    # Most draws first: each sample left in a bucket >= its pending draws, so taking the
    # lowest such bucket never takes the one a sample of fewer draws needs later.
    for draws in sorted((d for _, d in gone.values()), reverse=True):
        buckets = sorted(b for b, n in hist.items() if n > 0)
        if not buckets:
            raise ValueError("malformed buffer snapshot: a pending sample left uncounted")
        # (none as high: its draws before a rewind were reset; the highest then)
        b = next((b for b in buckets if b >= draws), buckets[-1])
        hist[b] -= 1
        if not hist[b]:
            del hist[b]
    age = max(held.ages, default=0)
    for sample, _ in gone.values():
        held.items.append(dict(sample))
        held.ages.append(age)
        held.draws.append(0)


class ShareTooSmall(ValueError):
    """A reservoir share of more never-drawn samples than the new capacity: none may be
    dropped (each is owed a draw). `needed`: the least capacity that holds every new
    rank's (the same on every new rank); `undrawn`: each new rank's count."""

    def __init__(
        self, undrawn: Sequence[int], capacity: int, old_capacity: int, old_ranks: int
    ) -> None:
        self.undrawn, self.capacity, self.needed = list(undrawn), capacity, max(undrawn)
        worst = self.undrawn.index(self.needed)
        m = len(self.undrawn)
        counts = f" (each new rank's: {self.undrawn})" if m > 1 else ""
        #: what is wrong, without the advice (a caller words the advice its own way)
        self.problem = (
            f"resharding the reservoirs of {old_ranks} ranks (buffer_size {old_capacity} "
            f"each) over {m} gives rank {worst} {self.needed} never-drawn samples{counts}, "
            f"more than its buffer_size {capacity}: none may be dropped (each is owed a draw)"
        )
        super().__init__(
            f"{self.problem}; resume with buffer_size {self.needed} or more, or on more ranks"
        )


def check_undrawn(undrawn: Sequence[int], capacity: int, old_capacity: int, k: int) -> None:
    """Raise `ShareTooSmall` if a new rank's never-drawn samples exceed `capacity`."""
    if max(undrawn, default=0) > capacity:
        raise ShareTooSmall(undrawn, capacity, old_capacity, k)


def evict_to(
    held: list[Entry], capacity: int, counters: dict[str, int], hist: dict[int, int]
) -> list[Entry]:
    """A reservoir share cut to `capacity` by evicting drawn samples, oldest first (its
    never-drawn samples must fit: `share` refuses a share where they do not)."""
    excess = len(held) - capacity
    drawn = sorted((j for j, e in enumerate(held) if e.draws > 0), key=lambda j: -held[j].age)
    if len(drawn) < excess:  # (`share` checked it for every new rank)
        raise ValueError(
            f"a reservoir share of {len(held) - len(drawn)} never-drawn samples does not fit "
            f"its capacity {capacity}"
        )
    gone = set(drawn[:excess])
    for j in gone:
        d = held[j].draws
        hist[d] = hist.get(d, 0) + 1
    counters["evicted"] += excess
    return [e for j, e in enumerate(held) if j not in gone]


def _content_key(sample: Sample) -> tuple[tuple[str, bytes | None], ...]:
    """A sample's whole content as a hashable key: equal keys, equal samples (every
    field's name, dtype, shape and bytes)."""
    return tuple((name, _bytes(sample[name])) for name in sorted(sample))


def _bytes(array: np.ndarray | None) -> bytes | None:
    if array is None:
        return None
    return f"{array.dtype.str}{array.shape}".encode() + np.ascontiguousarray(array).tobytes()


def _same(a: Sample, b: Sample) -> bool:
    return a.keys() == b.keys() and all(
        a[f].dtype == b[f].dtype and np.array_equal(a[f], b[f]) for f in a
    )
