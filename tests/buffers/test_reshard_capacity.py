"""Resharding buffer snapshots into new ranks' capacity, and a reservoir's draws
(`melissa_trainer.buffers.reshard`): a FIFO share over capacity overfills, a reservoir's
evicts drawn samples oldest first or is refused (the same on every new rank, naming a
size that fits), and a pending batch's samples are held again undrawn."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from reshard_snapshots import CAPACITY, make, old_rank, reservoir_draws, sample, uids

from melissa_trainer.buffers import ReservoirBuffer, ShareTooSmall
from melissa_trainer.buffers.reshard import share

pytestmark = pytest.mark.timeout(120)

SMALL = 40  # a new rank's capacity, under what the old ranks held


def test_a_fifo_share_over_capacity_overfills_as_a_rewind_does() -> None:
    olds = [old_rank("fifo", r, n=35, trained=0, pending=0, capacity=SMALL) for r in range(3)]
    arrays, meta = share([s for s, _ in olds], [[], [], []], 0, 1)
    buf = make("fifo", capacity=SMALL)
    buf.load_state_dict(arrays, meta)
    assert len(buf) == 105 > buf.capacity
    with pytest.raises(
        TimeoutError, match="buffer full; 105/40 samples held"
    ):  # full: a put waits until reads make room
        buf.put(sample(-1), timeout=0)


def test_a_reservoir_share_over_capacity_evicts_drawn_samples_oldest_first() -> None:
    olds = [old_rank("reservoir", r, n=30, trained=6, pending=0, capacity=SMALL) for r in range(2)]
    snaps = [s for s, _ in olds]
    held = sum(len(uids(a)) for a, _ in snaps)
    arrays, meta = share(snaps, [[], []], 0, 1)
    assert len(uids(arrays)) == SMALL < held
    assert meta["evicted"] == sum(s[1]["evicted"] for s in snaps) + held - SMALL
    draws = reservoir_draws(meta, arrays)
    old = {}
    for a, m in snaps:
        old.update(reservoir_draws(m, a))
    undrawn = {u for u, d in old.items() if d == 0}
    assert undrawn <= set(draws)  # no never-drawn sample is dropped
    evicted = set(old) - set(draws)
    age = {u: 29 - u % 1000 for u in old}  # 30 puts on each old rank, uid = its insert id
    assert min(age[u] for u in evicted) >= max(age[u] for u in set(draws) - undrawn)
    buf = make("reservoir", capacity=SMALL)
    buf.load_state_dict(arrays, meta)


def test_a_reservoir_share_of_too_many_undrawn_samples_is_refused_naming_a_size_that_fits() -> None:
    olds = [old_rank("reservoir", r, n=30, trained=0, pending=0, capacity=SMALL) for r in range(2)]
    snaps = [s for s, _ in olds]
    refused = "60 never-drawn samples, more than its buffer_size 40.*resume with buffer_size 60 "
    with pytest.raises(ShareTooSmall, match=refused + "or more, or on more ranks") as info:
        share(snaps, [[], []], 0, 1)
    assert info.value.needed == 60
    # the advice works: every sample held, none dropped
    arrays, meta = share(snaps, [[], []], 0, 1, capacity=info.value.needed)
    assert sorted(uids(arrays)) == sorted(u for a, _ in snaps for u in uids(a))
    buf = make("reservoir", capacity=60)
    buf.load_state_dict(arrays, meta)
    assert len(buf) == 60


def test_the_refusal_of_a_share_is_the_same_on_every_new_rank() -> None:
    """3 -> 2: every new rank refuses alike, naming the size the fullest share needs
    (so that the advice works for all), counting the draws that pending batches took
    as given back (a sample drawn only by a pending batch is owed its draw again)."""
    olds = [old_rank("reservoir", r, n=35, trained=1, pending=2, capacity=SMALL) for r in range(3)]
    snaps, pend = [s for s, _ in olds], [p for _, p in olds]
    errors = []
    for j in range(2):
        with pytest.raises(ShareTooSmall) as info:
            share(snaps, pend, j, 2)
        errors.append((str(info.value), info.value.needed, info.value.undrawn))
    assert errors[0] == errors[1]
    # the oracle: never drawn, or drawn by the pending batches alone (their draws undone)
    pending_draws = Counter(int(s["uid"]) for _, p in olds for b in p for s in b)
    owed = 0
    for arrays, meta in snaps:
        for uid, draws in reservoir_draws(meta, arrays).items():
            owed += draws - pending_draws.get(uid, 0) == 0
    gone = set(pending_draws) - {u for a, _ in snaps for u in uids(a)}  # held again, undrawn
    assert sum(errors[0][2]) == owed + len(gone)
    needed = errors[0][1]
    shares = [share(snaps, pend, j, 2, capacity=needed) for j in range(2)]
    got = Counter(u for arrays, _ in shares for u in uids(arrays))
    assert max(got.values()) == 1
    for arrays, meta in shares:
        buf = make("reservoir", capacity=needed)
        buf.load_state_dict(arrays, meta)


def test_a_reservoir_pending_draw_of_a_sample_drawn_once_makes_it_undrawn_again() -> None:
    buf = make("reservoir")
    for i in range(10):
        buf.put(sample(i))
    taken = [buf.get_batch(3)]
    arrays, meta = buf.state_dict()
    new_arrays, new_meta = share([(arrays, meta)], [taken], 0, 2)
    other = share([(arrays, meta)], [taken], 1, 2)
    draws = reservoir_draws(new_meta, new_arrays) | reservoir_draws(other[1], other[0])
    assert all(d == 0 for d in draws.values())  # every draw was the pending batch's
    assert new_meta["got"] + other[1]["got"] == 0
    for a, m in (
        (new_arrays, new_meta),
        other,
    ):  # closed after the resume, each new rank serves all of its samples once
        b = make("reservoir")
        b.load_state_dict(a, m)
        b.close()
        assert len(b.get_batch(CAPACITY)) == len(uids(a))


def test_a_reservoir_pending_sample_that_left_is_held_again_undrawn() -> None:
    # samples with one large field only: no small field narrows, contents are compared
    buf = ReservoirBuffer(4, 1, seed=5)
    for i in range(4):
        buf.put({"x": np.full(32, i, np.float32)})
    taken = [buf.get_batch(3)]
    for i in range(4, 6):  # evicts two drawn samples, some perhaps of the pending batch
        buf.put({"x": np.full(32, i, np.float32)})
    arrays, meta = buf.state_dict()
    held = {int(v[0]) for k, v in arrays.items()}
    c = meta["contents"]
    old_draws = {int(arrays[f"s{s}/x"][0]): c["draws"][s] for s in c["undrawn"] + c["drawn"]}
    shares = [share([(arrays, meta)], [taken], j, 2) for j in range(2)]
    draws: dict[int, int] = {}
    for a, m in shares:
        cs = m["contents"]
        draws |= {int(a[f"s{s}/x"][0]): cs["draws"][s] for s in cs["undrawn"] + cs["drawn"]}
    taken_ids = Counter(int(s["x"][0]) for s in taken[0])
    gone = set(taken_ids) - held  # evicted after their draw: held again, undrawn
    assert set(draws) == held | gone
    assert draws == {
        **{u: d - taken_ids[u] for u, d in old_draws.items()},
        **dict.fromkeys(gone, 0),
    }
    assert sum(m["got"] for _, m in shares) == meta["got"] - 3  # every pending draw undone
