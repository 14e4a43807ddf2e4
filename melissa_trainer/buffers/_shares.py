"""A buffer snapshot as `reshard.share` works on it: one old rank's entries decoded (their
ages and draw counts), its pending batches undone (`decode`, `match_retained`), and a new
rank's share encoded back into the snapshot its buffer loads (`encode`).

The rules each step follows are `reshard`'s module docstring (what holds exactly, what
is re-derived). Pure functions of their arguments; arrays are read only when an entry
is (`_entries.Items`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _state
from ._common import Sample
from ._entries import Entry, Index, Items, evict_to, field_names, put_back

__all__ = [
    "Batches",
    "RankSnapshot",
    "Snapshot",
    "Stats",
    "check_same",
    "decode",
    "encode",
    "match_retained",
]

#: a snapshot as `share` reads it: `Buffer.state_dict()`, or `read_snapshot` (lazy arrays)
Snapshot = tuple[Mapping[str, np.ndarray], dict[str, Any]]
Batches = Sequence[Sequence[Sample]]


@dataclass
class Stats:
    """A buffer's counters, closed flag and RNG state (what `encode` writes)."""

    counters: dict[str, int]  # put, got, evicted, age_sum
    hist: dict[int, int]
    limiter: dict[str, Any] | None
    closed: bool
    rng: dict[str, Any]


@dataclass
class RankSnapshot(Stats):
    """One old rank's snapshot, decoded, its pending batches undone."""

    held: Items
    retained: Items


def check_same(snapshots: Sequence[Snapshot]) -> None:
    first = snapshots[0][1]
    if not isinstance(first, dict) or first.get("kind") not in ("fifo", "firo", "reservoir"):
        raise ValueError(f"not a buffer snapshot of a known kind: {first.get('kind')!r}")

    def describe(meta: dict[str, Any]) -> tuple[Any, ...]:
        lim = meta.get("rate_limiter")
        params = None
        if lim is not None:
            params = (lim["samples_per_insert"], lim["tolerance"], lim["min_size_to_sample"])
        contents = meta.get("contents", {})
        reuse = contents.get("max_sample_reuse")
        choices = (contents.get("draw_choices", 1), contents.get("evict_choices", 1))
        return (meta.get("kind"), meta.get("capacity"), meta.get("retain"), params, reuse, choices)

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
                "max_sample_reuse, (draw_choices, evict_choices)): "
                f"rank 0 {want}, rank {r} {describe(meta)}"
            )


def decode(snapshot: Snapshot, batches: Batches) -> RankSnapshot:
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
        old = RankSnapshot(
            counters, hist, meta.get("rate_limiter"), closed, meta["rng"], held, kept
        )
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


def match_retained(
    kind: str, held: list[Entry], retained: list[Entry], taken: list[Sample]
) -> list[Entry]:
    """Undo, within this rank's share, what the taken samples left behind: a FIFO/FIRO
    drops the retained copy of each taken sample (it is held again, and would be served
    twice). Each rank matches the taken samples of every old rank against its own share
    (the rank holding a sample finds it; a content held twice, every field equal, is
    matched once per share that holds it: the stream's dedup rules that out). Returns
    the retained entries left. (A reservoir's draws were given back by `decode`, on
    each old rank's own samples, before the dealing.)"""
    if not taken or kind == "reservoir" or not retained:
        return retained
    index = Index(retained, taken)
    drop = {j for s in taken if (j := index.pop(s)) is not None}
    return [e for j, e in enumerate(retained) if j not in drop]


def encode(
    first: dict[str, Any],
    kind: str,
    held: list[Entry],
    retained: list[Entry],
    stats: Stats,
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
            "draw_choices": first["contents"].get("draw_choices", 1),
            "evict_choices": first["contents"].get("evict_choices", 1),
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
