"""Resharding buffer snapshots: k old ranks' buffers dealt over m new ranks.

`share(snapshots, pending, rank, world_size)` is a pure function: each new rank calls
it on the same files (every old rank's `Buffer.state_dict` and its dataset's pending
batches, `read_snapshot` and `melissa_trainer.core.dataset.read_pending`) and gets the
snapshot it loads with its ordinary `Buffer.load_state_dict`; no communication, and the
same inputs give the same shares on every rank (iteration in old-rank and slot order,
no hashing of Python objects, RNG derived from the snapshots only).

What holds exactly (``k != m``):

* **Samples.** The union of the k ranks' held samples (and FIFO/FIRO retained samples,
  for pseudo-epochs) is dealt round-robin over the m ranks, oldest first (an age counts
  inserts on the sample's own old rank since it came in), each sample held by exactly
  one new rank. Each sample keeps its draw count (reservoir) and its age. Retained
  samples are dealt the same way, apart from the held ones.
* **Pending batches** (taken by the dataset, not trained; the new ranks have none) are
  undone, as if they had never been taken: FIFO/FIRO put their samples back at the
  head of their rank's queue (they were served before everything still held) and
  drop them from the retained list (a retained copy would be served twice; each new
  rank matches every pending sample by content against its own share, the rank
  holding it finds it; a content held twice, every field equal, which a stream's
  dedup rules out, is matched once per share holding a copy); a reservoir gives each
  draw back to its sample (its draw count minus one; undrawn again at zero, so a
  drain after close serves it), matched by content among its own old rank's samples,
  before the dealing (so that every new rank knows every share's never-drawn count).
* **A reservoir's pending sample no longer held** (evicted, or removed at
  ``max_sample_reuse``, after its draw: taken, never trained) is held again, undrawn
  (draw count 0: its draws before the pending batch left with it, so it is owed one
  draw, served by a drain after close, never evicted before it), by exactly one new
  rank: it joins its old rank's samples, once per content, after them in batch and
  position order, aged as that rank's oldest held sample (its insert id was not
  kept), and is dealt with them. Its departure is undone: ``evicted`` less one, and
  one less in the lowest reuse-histogram bucket of at least its draws in the pending
  batches (the bucket it left in was not kept: exact when it had no draw before
  them), so a reservoir's histogram still sums to ``evicted`` and its held samples to
  ``put - evicted`` (over the ranks). "No longer held" is decided on every new rank
  for every old rank's pending samples: the small fields of that rank's held samples
  are read (`_entries.Index`), and a candidate whose small fields match is read whole.
* **Counters**, as totals: ``put``, ``got``, ``evicted``, ``age_sum``, each bucket of
  the reuse histogram and the rate limiter's ``inserts`` and ``samples`` are summed
  over the old ranks (``got``, the limiter's ``samples`` and, FIFO/FIRO, the histogram's
  bucket 1 less the undone serves and draws; the limiter's ``samples`` adjusted as its
  credit says, below), then split over the new ranks
  (``total // m``, one more on the first ``total % m`` ranks): the sums over the new
  ranks are the old sums (``evicted`` and the histogram less the departures undone,
  above). Evictions this function makes (see capacity) are added to the evicting
  rank's ``evicted`` and histogram.
* **Closed**: a new rank is closed when every old rank was (reception had ended).

What is re-derived:

* **RNG**: a fresh PCG64 stream per new rank, seeded from every old rank's generator
  state, ``k``, ``m`` and the new rank (`numpy.random.SeedSequence`): reproducible
  for the same checkpoint and world size, not the draws an unresized run would make.
* **Insert ids**: ``put - 1 - age`` on the new rank (possibly negative), so ages and
  the mean age go on meaningfully; a FIFO/FIRO pending sample, whose id the dataset
  does not keep, takes the age of its rank's oldest held sample. ``age_sum`` keeps the
  ages of undone serves (``mean_age`` is approximate after a resize).
* **The rate limiter's credit** ``r * (inserts - min_size_to_sample) - samples``: its
  sum over the ranks is kept (the draws owed before the next inserts, in all), dealt
  evenly: ``inserts`` is the old total split, ``samples`` the old total plus
  ``r * min_size_to_sample * (k - m)`` (each rank's first ``min_size_to_sample``
  inserts are free of the ratio, so fewer ranks have fewer free inserts), at least 0,
  split. The limiter's ``samples`` is then not the sum of the draws (``got`` is).

``k == m``: each rank keeps its own snapshot: unchanged, bitwise (RNG included) when
it had no pending batch; otherwise with its own pending batches undone as above, its
counters and RNG its own (a full reservoir then holding an evicted pending sample
again may exceed its capacity: refused, as below; a resume on the same number of
ranks does not call `share`, it trains the pending batches).

Reading: `read_snapshot` gives arrays read from the file when asked for, so a new rank
reads the samples of its own share, not the other ranks' (a 2 -> 3 resize reads about a
third of the checkpoint's samples on each new rank), and every old rank's file header;
a reservoir with pending batches also has the small fields of every held sample read,
and each still-held pending sample whole (without a small field to narrow on, every
held sample tried, whole).

Capacity: the new ranks' ``buffer_size`` (`share`'s `capacity`), the checkpoint's or
any other: a resume on fewer ranks may need a larger one. A FIFO/FIRO share larger than
it is held whole, overfilling the buffer as a `Buffer.rewind` may (``put`` waits until
it is below capacity again). A reservoir share larger than it evicts drawn samples,
oldest first (a full reservoir evicts drawn samples to make room); if a new rank's
never-drawn samples alone exceed it, `share` raises `ShareTooSmall` on every new rank
alike (their counts come from the draw counts and ages, no sample read), naming the
least ``buffer_size`` that holds every rank's: none is dropped (each is owed a draw; a
pending sample held again counts as never drawn), and resuming with that size works.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _state
from ._common import Sample
from ._entries import (
    Entry,
    Index,
    Items,
    ShareTooSmall,
    check_undrawn,
    evict_to,
    field_names,
    put_back,
)

__all__ = ["ShareTooSmall", "read_snapshot", "share"]

#: a snapshot as `share` reads it: `Buffer.state_dict()`, or `read_snapshot` (lazy arrays)
Snapshot = tuple[Mapping[str, np.ndarray], dict[str, Any]]
Batches = Sequence[Sequence[Sample]]


def read_snapshot(directory: str | os.PathLike[str]) -> Snapshot:
    """The ``(arrays, meta)`` a `Buffer.save` wrote into `directory` (its
    ``buffer.safetensors`` and ``buffer.json``), as `Buffer.state_dict` gave them; the
    arrays are a mapping that reads each array from the file when asked for
    (`_state.LazyArrays`), so that `share` reads only what its rank gets."""
    arrays = _state.LazyArrays(os.path.join(directory, _state.ARRAYS_FILE))
    with open(os.path.join(directory, _state.META_FILE), encoding="utf-8") as fh:
        meta = json.load(fh)
    return arrays, meta


@dataclass
class _Stats:
    """A buffer's counters, closed flag and RNG state (what `_encode` writes)."""

    counters: dict[str, int]  # put, got, evicted, age_sum
    hist: dict[int, int]
    limiter: dict[str, Any] | None
    closed: bool
    rng: dict[str, Any]


@dataclass
class _Rank(_Stats):
    """One old rank's snapshot, decoded, its pending batches undone."""

    held: Items
    retained: Items


def share(
    snapshots: Sequence[Snapshot],
    pending: Sequence[Batches],
    rank: int,
    world_size: int,
    capacity: int | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The snapshot new rank `rank` of `world_size` loads (see the module docstring).

    Args:
        snapshots: old rank r's `Buffer.state_dict()` at index r.
        pending: old rank r's pending batches (lists of samples) at index r.
        capacity: the new ranks' buffer capacity (``buffer_size``); None: the
            checkpoint's. Any capacity: a reservoir share over it evicts drawn
            samples, a FIFO/FIRO share is held whole (module docstring, "Capacity").

    Raises:
        ShareTooSmall: a reservoir share, on any new rank, of more never-drawn samples
            than `capacity` (raised alike on every new rank, naming the least capacity
            that fits them all).
        ValueError: no snapshot, a pending list per old rank missing, `rank` out of
            range, snapshots of different buffers (kind, capacity, retain, rate
            limiter, ``max_sample_reuse``), a malformed snapshot.
    """
    k = len(snapshots)
    if k == 0:
        raise ValueError("resharding needs the snapshot of at least one old rank")
    if len(pending) != k:
        raise ValueError(f"{k} buffer snapshots but pending batches of {len(pending)} ranks")
    if not (isinstance(world_size, int) and world_size >= 1 and 0 <= rank < world_size):
        raise ValueError(f"rank {rank!r} of world size {world_size!r} is out of range")
    first = snapshots[0][1]
    _check_same(snapshots)
    old_capacity = int(first["capacity"])
    if capacity is None:
        capacity = old_capacity
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be an integer >= 1, not {capacity!r}")
    if (
        k == world_size
        and capacity == old_capacity
        and not any(len(p) for p in pending[rank : rank + 1])
    ):
        arrays, meta = snapshots[rank]  # nothing moves: bitwise
        return (arrays if isinstance(arrays, dict) else dict(arrays)), meta
    kind = str(first["kind"])
    if k == world_size:
        old = _decode(snapshots[rank], pending[rank])
        if kind == "reservoir":
            check_undrawn([old.held.draws.count(0)], capacity, old_capacity, k)
        taken = [dict(s) for batch in pending[rank] for s in batch]
        held = old.held.entries()
        retained = _match(kind, held, old.retained.entries(), taken)
        return _encode(first, kind, held, retained, old, old.rng, capacity)
    olds = [_decode(s, p) for s, p in zip(snapshots, pending, strict=True)]
    if kind == "reservoir":
        check_undrawn(_undrawn_per_rank(olds, world_size), capacity, old_capacity, k)
    held = _deal(olds, "held", rank, world_size)
    taken = [dict(s) for batches in pending for batch in batches for s in batch]
    retained = _match(kind, held, _deal(olds, "retained", rank, world_size), taken)
    totals = _Stats({}, {}, None, all(o.closed for o in olds), {})
    for key in ("put", "got", "evicted", "age_sum"):
        totals.counters[key] = _part(sum(o.counters[key] for o in olds), rank, world_size)
    buckets = sorted({b for o in olds for b in o.hist})
    for b in buckets:
        n = _part(sum(o.hist.get(b, 0) for o in olds), rank, world_size)
        if n:
            totals.hist[b] = n
    if first.get("rate_limiter") is not None:
        lim = dict(first["rate_limiter"])
        inserts = sum(int(o.limiter["inserts"]) for o in olds if o.limiter is not None)
        samples = sum(int(o.limiter["samples"]) for o in olds if o.limiter is not None)
        # Keep the credits' sum, r * (inserts - min) - samples over the ranks: each rank's
        # first `min` inserts are free of the ratio, so m ranks have (k - m) * min free
        # inserts fewer than k had; counting them as drawn for keeps the draws owed as
        # they were (without it, 3 -> 1 ranks at r = 8, min = 500 owed 8,000 draws more,
        # and the one rank trained 250 steps with its inserts held back).
        free = float(lim["samples_per_insert"]) * int(lim["min_size_to_sample"]) * (k - world_size)
        samples = max(0, samples + round(free))
        lim["inserts"] = _part(inserts, rank, world_size)
        lim["samples"] = _part(samples, rank, world_size)
        totals.limiter = lim
    rng = _derived_rng([o.rng for o in olds], k, rank, world_size)
    return _encode(first, kind, held, retained, totals, rng, capacity)


def _undrawn_per_rank(olds: list[_Rank], world_size: int) -> list[int]:
    """Each new rank's never-drawn samples once dealt (their pending draws given back
    by `_decode`): from the draw counts and ages alone, no sample read."""
    order = _deal_order([o.held for o in olds])
    if order is None:
        return [0] * world_size
    undrawn = np.concatenate([np.asarray(o.held.draws, np.int64) for o in olds]) == 0
    return [int(undrawn[order[r::world_size]].sum()) for r in range(world_size)]


# -- decoding, undoing pending batches ---------------------------------------------------


def _check_same(snapshots: Sequence[Snapshot]) -> None:
    first = snapshots[0][1]
    if not isinstance(first, dict) or first.get("kind") not in ("fifo", "firo", "reservoir"):
        raise ValueError(f"not a buffer snapshot of a known kind: {first.get('kind')!r}")

    def describe(meta: dict[str, Any]) -> tuple[Any, ...]:
        lim = meta.get("rate_limiter")
        params = None
        if lim is not None:
            params = (lim["samples_per_insert"], lim["tolerance"], lim["min_size_to_sample"])
        reuse = meta.get("contents", {}).get("max_sample_reuse")
        return (meta.get("kind"), meta.get("capacity"), meta.get("retain"), params, reuse)

    want = describe(first)
    for r, (_, meta) in enumerate(snapshots):
        if meta.get("format_version") != _state.FORMAT_VERSION:
            raise ValueError(
                f"buffer snapshot of old rank {r}: unsupported format "
                f"{meta.get('format_version')!r}"
            )
        if describe(meta) != want:
            raise ValueError(
                "the old ranks' buffers differ (kind, capacity, retain, rate limiter, "
                f"max_sample_reuse): rank 0 {want}, rank {r} {describe(meta)}"
            )


def _decode(snapshot: Snapshot, batches: Batches) -> _Rank:
    """One old rank's samples with their ages and draw counts, its pending undone."""
    arrays, meta = snapshot
    try:
        names = field_names(arrays, meta.get("field_order"))
        contents = meta["contents"]
        put = int(meta["put"])
        counters = {k: int(meta[k]) for k in ("put", "got", "evicted", "age_sum")}
        hist = {int(b): int(n) for b, n in meta["reuse_histogram"].items()}
        held, kept = Items(arrays, names), Items(arrays, names)
        closed = bool(meta["closed"])
        old = _Rank(counters, hist, meta.get("rate_limiter"), closed, meta["rng"], held, kept)
        if old.limiter is not None:
            old.limiter = dict(old.limiter)
        if meta["kind"] == "reservoir":
            draws = _state.int_list("draws", contents["draws"])
            ins = _state.int_list("insert_ids", contents["insert_ids"])
            slots = [*contents["undrawn"], *contents["drawn"]]
            held.items = [f"s{slot}" for slot in slots]
            held.ages = [put - 1 - ins[slot] for slot in slots]
            held.draws = [draws[slot] for slot in slots]
        else:
            ids = _state.int_list("insert_ids", contents["insert_ids"])
            kept_ids = _state.int_list("retained_insert_ids", contents["retained_insert_ids"])
            held.items = [f"s{i}" for i in range(len(ids))]
            held.ages = [put - 1 - x for x in ids]
            held.draws = [0] * len(ids)
            kept.items = [f"r{i}" for i in range(len(kept_ids))]
            kept.ages = [put - 1 - x for x in kept_ids]
            kept.draws = [0] * len(kept_ids)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"malformed buffer snapshot: {exc!r}") from exc
    if meta["kind"] == "reservoir":
        put_back(old.held, old.counters, old.hist, batches)
    n = sum(len(batch) for batch in batches)  # the serves or draws undone
    old.counters["got"] = max(0, old.counters["got"] - n)
    if old.limiter is not None:
        old.limiter["samples"] = max(0, int(old.limiter["samples"]) - n)
    if n and meta["kind"] != "reservoir":  # back at the head of the queue, un-served
        age = max(held.ages, default=0)
        held.items[:0] = [dict(s) for batch in batches for s in batch]
        held.ages[:0] = [age] * n
        held.draws[:0] = [0] * n
        old.hist[1] = max(0, old.hist.get(1, 0) - n)
        if not old.hist[1]:
            del old.hist[1]
    return old


def _match(kind: str, held: list[Entry], retained: list[Entry], taken: list[Sample]) -> list[Entry]:
    """Undo, within this rank's share, what the taken samples left behind: a FIFO/FIRO
    drops the retained copy of each taken sample (it is held again, and would be served
    twice). Each rank matches the taken samples of every old rank against its own share
    (the rank holding a sample finds it; a content held twice, every field equal, is
    matched once per share that holds it: the stream's dedup rules that out). Returns
    the retained entries left. (A reservoir's draws were given back by `_decode`, on
    each old rank's own samples, before the dealing.)"""
    if not taken or kind == "reservoir" or not retained:
        return retained
    index = Index(retained, taken)
    drop = {j for s in taken if (j := index.pop(s)) is not None}
    return [e for j, e in enumerate(retained) if j not in drop]


# -- dealing, encoding -------------------------------------------------------------------


def _deal_order(items: list[Items]) -> np.ndarray | None:
    """The order the old ranks' entries are dealt in (indices into their concatenation):
    oldest first, ties by old rank, then position; None when there is none."""
    sizes = [len(i.items) for i in items]
    if not sum(sizes):
        return None
    ages = np.concatenate([np.asarray(i.ages, np.int64) for i in items])
    ranks = np.repeat(np.arange(len(items)), sizes)
    positions = np.concatenate([np.arange(n) for n in sizes])
    return np.lexsort((positions, ranks, -ages))


def _deal(olds: list[_Rank], which: str, rank: int, world_size: int) -> list[Entry]:
    """New rank `rank`'s entries: all old ranks' entries in `_deal_order`, every
    `world_size`-th from the `rank`-th. Only those are made."""
    items: list[Items] = [getattr(o, which) for o in olds]
    order = _deal_order(items)
    if order is None:
        return []
    sizes = [len(i.items) for i in items]
    ranks = np.repeat(np.arange(len(items)), sizes)
    positions = np.concatenate([np.arange(n) for n in sizes])
    mine = order[rank::world_size]
    return [
        items[r].entry(j)
        for r, j in zip(ranks[mine].tolist(), positions[mine].tolist(), strict=True)
    ]


def _part(total: int, rank: int, world_size: int) -> int:
    """New rank `rank`'s part of an additive `total`: the parts sum to it."""
    return total // world_size + (1 if rank < total % world_size else 0)


def _derived_rng(
    states: list[dict[str, Any]], k: int, rank: int, world_size: int
) -> dict[str, Any]:
    entropy = [int(s[key]) for s in states for key in ("state", "inc")]
    seq = np.random.SeedSequence(entropy=[*entropy, k, world_size], spawn_key=(rank,))
    return _state.rng_state(np.random.Generator(np.random.PCG64(seq)))


def _encode(
    first: dict[str, Any],
    kind: str,
    held: list[Entry],
    retained: list[Entry],
    stats: _Stats,
    rng: dict[str, Any],
    capacity: int,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The snapshot of a buffer of `capacity` holding `held` (and `retained`) with
    `stats`' counters."""
    counters, hist = dict(stats.counters), dict(stats.hist)
    if kind == "reservoir" and len(held) > capacity:
        held = evict_to(held, capacity, counters, hist)
    put = counters["put"]
    arrays: dict[str, np.ndarray] = {}
    contents: dict[str, Any]
    if kind == "reservoir":
        undrawn = [j for j, e in enumerate(held) if e.draws == 0]
        drawn = [j for j, e in enumerate(held) if e.draws > 0]
        for slot, e in enumerate(held):
            e.encode(arrays, f"s{slot}")
        contents = {
            "max_sample_reuse": first["contents"].get("max_sample_reuse"),
            "n_slots": len(held),
            "draws": [e.draws for e in held],
            "insert_ids": [put - 1 - e.age for e in held],
            "undrawn": undrawn,
            "drawn": drawn,
            "free": [],
        }
    else:
        for i, e in enumerate(held):
            e.encode(arrays, f"s{i}")
        for i, e in enumerate(retained):
            e.encode(arrays, f"r{i}")
        contents = {
            "insert_ids": [put - 1 - e.age for e in held],
            "retained_insert_ids": [put - 1 - e.age for e in retained],
        }
    meta: dict[str, Any] = {
        "kind": kind,
        "format_version": _state.FORMAT_VERSION,
        "capacity": capacity,
        "watermark": first.get("watermark"),
        "retain": first.get("retain"),
        "closed": stats.closed,
        **counters,
        "reuse_histogram": {str(b): n for b, n in sorted(hist.items())},
        "rng": rng,
        "rate_limiter": stats.limiter,
        "contents": contents,
        "field_order": _state.field_order(arrays),
    }
    return arrays, meta
