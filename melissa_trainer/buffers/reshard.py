"""Resharding buffer snapshots: k old ranks' buffers dealt over m new ranks.

`share(snapshots, pending, rank, world_size)` is a pure function: each new rank calls
it on the same files (every old rank's `Buffer.state_dict` and its dataset's pending
batches, `read_snapshot` and `melissa_trainer.core.pending_file.read_pending`) and gets the
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

Here: `share` and the dealing of entries over the new ranks; `_shares` decodes a
snapshot (undoing its pending batches) and encodes a share back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _state
from ._entries import Entry, Items, check_undrawn
from ._shares import (
    Batches,
    RankSnapshot,
    Snapshot,
    Stats,
    check_same,
    decode,
    encode,
    match_retained,
)

__all__ = ["read_snapshot", "share"]


def read_snapshot(directory: str | os.PathLike[str]) -> Snapshot:
    """The ``(arrays, meta)`` a `Buffer.save` wrote into `directory` (its
    ``buffer.safetensors`` and ``buffer.json``), as `Buffer.state_dict` gave them; the
    arrays are a mapping that reads each array from the file when asked for
    (`_state.LazyArrays`), so that `share` reads only what its rank gets."""
    arrays = _state.LazyArrays(os.path.join(directory, _state.ARRAYS_FILE))
    with open(os.path.join(directory, _state.META_FILE), encoding="utf-8") as fh:
        meta = json.load(fh)
    return arrays, meta


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
    check_same(snapshots)
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
        old = decode(snapshots[rank], pending[rank])
        if kind == "reservoir":
            check_undrawn([old.held.draws.count(0)], capacity, old_capacity, k)
        taken = [dict(s) for batch in pending[rank] for s in batch]
        held = old.held.entries()
        retained = match_retained(kind, held, old.retained.entries(), taken)
        return encode(first, kind, held, retained, old, old.rng, capacity)
    olds = [decode(s, p) for s, p in zip(snapshots, pending, strict=True)]
    if kind == "reservoir":
        check_undrawn(_undrawn_per_rank(olds, world_size), capacity, old_capacity, k)
    held = _deal(olds, "held", rank, world_size)
    taken = [dict(s) for batches in pending for batch in batches for s in batch]
    retained = match_retained(kind, held, _deal(olds, "retained", rank, world_size), taken)
    totals = Stats({}, {}, None, all(o.closed for o in olds), {})
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
    return encode(first, kind, held, retained, totals, rng, capacity)


def _undrawn_per_rank(olds: list[RankSnapshot], world_size: int) -> list[int]:
    """Each new rank's never-drawn samples once dealt (their pending draws given back
    by `_shares.decode`): from the draw counts and ages alone, no sample read."""
    order = _deal_order([o.held for o in olds])
    if order is None:
        return [0] * world_size
    undrawn = np.concatenate([np.asarray(o.held.draws, np.int64) for o in olds]) == 0
    return [int(undrawn[order[r::world_size]].sum()) for r in range(world_size)]


# -- dealing ------------------------------------------------------------------------------


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


def _deal(olds: list[RankSnapshot], which: str, rank: int, world_size: int) -> list[Entry]:
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
