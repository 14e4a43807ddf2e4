"""Resharding buffer snapshots from k ranks to m (`melissa_trainer.buffers.reshard`).

Each sample carries a unique ``uid``; the oracle is the set of uids each old rank held,
retained and had pending, tracked here, independently of the function under test
(tests/buffers/reshard_snapshots.py). Capacity and a reservoir's draws:
test_reshard_capacity.py; snapshots read from files: test_reshard_files.py.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reshard_snapshots import KINDS, make, old_rank, reservoir_draws, sample, uids

from melissa_trainer.buffers import FIFOBuffer, FIROBuffer, RateLimiter, ReservoirBuffer
from melissa_trainer.buffers.reshard import share

pytestmark = pytest.mark.timeout(120)

RESIZES = [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1), (1, 3)]


def totals(metas: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: sum(m[k] for m in metas) for k in ("put", "got", "evicted", "age_sum")
    }
    hist: Counter[str] = Counter()
    for m in metas:
        hist.update(m["reuse_histogram"])
    out["hist"] = {k: v for k, v in hist.items() if v}
    if metas[0]["rate_limiter"] is not None:
        out["inserts"] = sum(m["rate_limiter"]["inserts"] for m in metas)
        out["samples"] = sum(m["rate_limiter"]["samples"] for m in metas)
        out["credit"] = sum(credit(m["rate_limiter"]) for m in metas)
    return out


def credit(limiter: dict[str, Any]) -> float:
    """The draws a rate limiter owes before its next inserts (`RateLimiter.can_insert`)."""
    r, free = limiter["samples_per_insert"], limiter["min_size_to_sample"]
    return float(r * (limiter["inserts"] - free) - limiter["samples"])


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize(("k", "m"), RESIZES)
def test_every_sample_is_held_exactly_once_after_a_resize(name: str, k: int, m: int) -> None:
    olds = [old_rank(name, r) for r in range(k)]
    snaps = [s for s, _ in olds]
    pend = [p for _, p in olds]
    shares = [share(snaps, pend, j, m) for j in range(m)]
    reservoir = name.startswith("reservoir")
    taken = [int(s["uid"]) for _, p in olds for b in p for s in b]

    # the oracle: every uid held or pending, each once (a reservoir's pending sample
    # that its buffer evicted, or removed at max_sample_reuse, is held again)
    old_held = [u for (arrays, _), _ in olds for u in uids(arrays)]
    gone = set(taken) - set(old_held) if reservoir else set()  # pending, not held
    expected = Counter(old_held + (sorted(gone) if reservoir else taken))
    got = Counter(u for arrays, _ in shares for u in uids(arrays))
    assert got == expected and max(got.values()) == 1
    old_kept = Counter(u for (arrays, _), _ in olds for u in uids(arrays, "r"))
    new_kept = Counter(u for arrays, _ in shares for u in uids(arrays, "r"))
    assert new_kept == old_kept - Counter(taken)  # a retained pending sample is held instead

    # statistics: sums over the new ranks are the old sums, less the undone serves
    before, after = totals([s[1] for s in snaps]), totals([s[1] for s in shares])
    assert after["put"] == before["put"]
    assert after["got"] == before["got"] - len(taken)
    assert after["evicted"] == before["evicted"] - len(gone)  # their departure undone
    assert after["age_sum"] == before["age_sum"]
    if not reservoir:
        assert after["hist"] == {
            k: v for k, v in (Counter(before["hist"]) - Counter({"1": len(taken)})).items()
        }
    else:  # one departure less per sample held again, each from a bucket >= its draws
        assert sum(after["hist"].values()) == sum(before["hist"].values()) - len(gone)
        assert Counter(after["hist"]) <= Counter(before["hist"])
    if "inserts" in before:
        assert after["inserts"] == before["inserts"]
        # the draws owed, kept: the pending draws given back are owed again (the
        # limiter's parameters: 2 draws per insert, 4 free inserts per rank)
        free = 2.0 * 4 * (k - m)
        clamped = before["samples"] - len(taken) + free < 0
        assert clamped or after["credit"] == before["credit"] + len(taken)
    if reservoir:  # draw counts travel with their sample, less the undone draws
        old_draws: Counter[int] = Counter()
        for arrays, meta in snaps:
            old_draws.update(reservoir_draws(meta, arrays))
        new_draws: Counter[int] = Counter()
        for arrays, meta in shares:
            new_draws.update(reservoir_draws(meta, arrays))
        held_taken = Counter(u for u in taken if u in old_draws)
        assert new_draws == {
            **{u: d - held_taken[u] for u, d in old_draws.items()},
            **{u: 0 for u in gone},  # held again, undrawn
        }

    # each new rank loads its share into a real buffer and draws from it
    drained: list[int] = []
    for arrays, meta in shares:
        buf = make(name, seed=7)
        buf.load_state_dict(arrays, meta)
        assert len(buf) == len(uids(arrays))
        if len(buf) >= 2:
            first = buf.get_batch(2)
            assert len(first) == 2
            drained += [int(s["uid"]) for s in first]
        buf.close()
        while batch := buf.get_batch(3):
            drained += [int(s["uid"]) for s in batch]
        assert buf.stats().put == meta["put"]
    if not reservoir:  # a FIFO/FIRO serves every sample of the union once
        assert sorted(drained) == sorted(expected)
    else:  # a reservoir: its draws are among the samples held
        assert set(drained) <= set(expected)


@pytest.mark.parametrize("name", ["fifo", "reservoir-limited", "firo-retain"])
def test_resharding_is_deterministic(name: str) -> None:
    olds = [old_rank(name, r) for r in range(3)]
    a = share([s for s, _ in olds], [p for _, p in olds], 1, 2)
    b = share([s for s, _ in olds], [p for _, p in olds], 1, 2)
    assert a[1] == b[1]
    assert a[0].keys() == b[0].keys()
    assert all(np.array_equal(a[0][key], b[0][key]) for key in a[0])
    # each new rank gets its own random stream
    c = share([s for s, _ in olds], [p for _, p in olds], 0, 2)
    assert c[1]["rng"] != a[1]["rng"]


def test_the_same_world_size_without_pending_batches_is_bitwise() -> None:
    olds = [old_rank("firo", r, pending=0) for r in range(2)]
    snaps = [s for s, _ in olds]
    for j in range(2):
        arrays, meta = share(snaps, [[], []], j, 2)
        assert arrays is snaps[j][0] and meta is snaps[j][1]


def test_the_same_world_size_undoes_each_ranks_own_pending_batches() -> None:
    olds = [old_rank("fifo", r) for r in range(2)]
    snaps = [s for s, _ in olds]
    arrays, meta = share(snaps, [p for _, p in olds], 1, 2)
    taken = [int(s["uid"]) for b in olds[1][1] for s in b]
    assert uids(arrays)[: len(taken)] == taken  # back at the head of the queue
    assert set(uids(arrays)) == set(uids(snaps[1][0])) | set(taken)
    assert meta["rng"] == snaps[1][1]["rng"]  # its own stream


def test_snapshots_of_different_buffers_are_refused() -> None:
    a, _ = old_rank("fifo", 0)
    b, _ = old_rank("firo", 1)
    with pytest.raises(ValueError, match="differ"):
        share([a, b], [[], []], 0, 1)
    with pytest.raises(ValueError, match="out of range"):
        share([a], [[]], 2, 2)
    with pytest.raises(ValueError, match="pending batches of 0 ranks"):
        share([a], [], 0, 1)


def test_a_new_rank_is_closed_only_if_every_old_rank_was() -> None:
    olds = [old_rank("firo", r) for r in range(3)]
    snaps = [s for s, _ in olds]
    pend = [p for _, p in olds]
    assert not any(share(snaps, pend, j, 2)[1]["closed"] for j in range(2))
    closed = [(a, dict(m, closed=True)) for a, m in snaps]
    assert all(share(closed, pend, j, 2)[1]["closed"] for j in range(2))
    mixed = [closed[0], snaps[1], closed[2]]
    assert not any(share(mixed, pend, j, 2)[1]["closed"] for j in range(2))


def test_the_rate_limiters_credit_is_kept_and_dealt_evenly() -> None:
    olds = [old_rank("reservoir-limited", r, n=30 + 10 * r) for r in range(3)]
    snaps = [s for s, _ in olds]
    pend = [p for _, p in olds]
    limiters = [share(snaps, pend, j, 2)[1]["rate_limiter"] for j in range(2)]
    inserts = sum(s[1]["rate_limiter"]["inserts"] for s in snaps)
    # the draws owed, from the old limiters, less the pending draws given back (3 x 2 x 4)
    owed = sum(credit(s[1]["rate_limiter"]) for s in snaps) + 3 * 2 * 4
    assert [lim["inserts"] for lim in limiters] == [inserts - inserts // 2, inserts // 2]
    assert sum(credit(lim) for lim in limiters) == owed
    assert abs(credit(limiters[0]) - credit(limiters[1])) <= 2.0 + 1  # r + 1 at most
    for lim in limiters:  # the parameters are the buffers'
        assert (lim["samples_per_insert"], lim["min_size_to_sample"]) == (2.0, 4)


@pytest.mark.parametrize(("k", "m"), [(3, 1), (1, 3)])
def test_fewer_ranks_owe_no_draws_the_old_ones_did_not(k: int, m: int) -> None:
    """3 ranks at r = 8, 500 free inserts each, drawn to the ratio: every one of them
    may insert. Resumed on one rank, that rank may insert too (with the totals merely
    summed it owed 8 x 500 x 2 = 8,000 draws first: its inserts, hence the stream, held
    back for 250 steps of 32); and the other way round."""
    snaps = []
    for _ in range(k):
        limiter = RateLimiter(8.0, 8.0 + 64, 500)
        limiter.on_insert(600)
        limiter.on_sample(8 * 100)  # to the ratio: credit 0
        assert limiter.can_insert()
        snaps.append({"rate_limiter": limiter.state_dict()})
    olds = [old_rank("reservoir", r) for r in range(k)]
    limited = [(arrays, dict(meta, rate_limiter=s["rate_limiter"]))
               for (arrays, meta), s in zip([o for o, _ in olds], snaps, strict=True)]  # fmt: skip
    for j in range(m):
        lim = share(limited, [[] for _ in range(k)], j, m)[1]["rate_limiter"]
        loaded = RateLimiter(8.0, 8.0 + 64, 500)
        loaded.load_state_dict(lim)
        assert loaded.can_insert(), (k, m, j, lim)


# -- property: random puts, draws and evictions with pending batches ---------------------

#: buffers small enough that puts after a pending batch evict its samples
PROPERTY_KINDS = {
    "fifo": lambda seed: FIFOBuffer(6, 1, seed=seed),
    "firo": lambda seed: FIROBuffer(6, 1, seed=seed),
    "reservoir": lambda seed: ReservoirBuffer(6, 1, seed=seed),
    "reservoir-max-reuse": lambda seed: ReservoirBuffer(6, 1, seed=seed, max_sample_reuse=2),
}

#: per old rank: (puts, batch size) steps before its pending batches, then after
steps = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=5)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(PROPERTY_KINDS)),
    km=st.sampled_from([(1, 2), (2, 1), (2, 3), (3, 2)]),
    ranks=st.lists(st.tuples(steps, steps), min_size=3, max_size=3),
)
def test_every_held_or_pending_sample_is_held_once_after_any_resize(
    name: str, km: tuple[int, int], ranks: list[tuple[list[Any], list[Any]]]
) -> None:
    k, m = km
    reservoir = name.startswith("reservoir")
    snaps, pend = [], []
    for r, (trained, pending) in enumerate(ranks[:k]):
        buf, uid = PROPERTY_KINDS[name](r), 1000 * r
        batches: list[list[dict[str, np.ndarray]]] = []
        for phase, plan in enumerate((trained, pending)):
            for puts, n in plan:
                for _ in range(puts):
                    # (a full FIFO, or a reservoir of undrawn samples only, refuses)
                    with contextlib.suppress(TimeoutError):
                        buf.put(sample(uid), timeout=0)
                    uid += 1
                if n and len(buf) >= n:
                    batch = buf.get_batch(n, timeout=0)
                    if phase:  # taken, not trained: pending (puts after it may evict)
                        batches.append(batch)
        snaps.append(buf.state_dict())
        pend.append(batches)

    # the oracle, from the old snapshots' uids and the pending batches
    held = [u for arrays, _ in snaps for u in uids(arrays)]
    taken = Counter(int(s["uid"]) for p in pend for b in p for s in b)
    union = set(held) | set(taken)
    draws: dict[int, int] = {}  # a reservoir's draw counts once its pending draws undone
    for arrays, meta in snaps if reservoir else ():
        draws |= {u: d - taken[u] for u, d in reservoir_draws(meta, arrays).items()}
    draws |= {u: 0 for u in union - draws.keys()} if reservoir else {}
    try:
        shares = [share(snaps, pend, j, m) for j in range(m)]
    except ValueError as exc:  # a reservoir share of too many undrawn samples only
        assert reservoir and "buffer_size" in str(exc)
        assert sum(d == 0 for d in draws.values()) > 6
        return
    got = Counter(u for arrays, _ in shares for u in uids(arrays))
    assert max(got.values(), default=1) == 1 and set(got) <= union
    dropped = union - set(got)  # a reservoir share over capacity evicts drawn samples
    assert not dropped if not reservoir else all(draws[u] > 0 for u in dropped)
    before, after = totals([s[1] for s in snaps]), totals([s[1] for s in shares])
    assert after["put"] == before["put"]
    assert after["got"] == before["got"] - taken.total()
    gone = len(union - set(held)) if reservoir else 0
    assert after["evicted"] == before["evicted"] - gone + len(dropped)
    if reservoir:  # every departure is an eviction, and counted once in the histogram
        assert sum(after["hist"].values()) == after["evicted"]
        new: dict[int, int] = {}
        for arrays, meta in shares:
            new |= reservoir_draws(meta, arrays)
        assert new == {u: d for u, d in draws.items() if u in got}
    for arrays, meta in shares:  # each share loads into a real buffer
        buf = PROPERTY_KINDS[name](9)
        buf.load_state_dict(arrays, meta)
        assert len(buf) == len(uids(arrays))
        if name == "fifo":  # an old rank's pending samples are served before its held ones
            buf.close()
            served = []
            while batch := buf.get_batch(1):
                served.append(int(batch[0]["uid"]))
            for r in range(k):
                mine = [u in taken for u in served if u // 1000 == r]
                assert mine == sorted(mine, reverse=True)
