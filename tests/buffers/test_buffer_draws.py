"""What FIRO and the reservoir draw: FIRO's seeded random order, each sample once; the
reservoir's draws with replacement (never evicting an unseen sample), its
`max_sample_reuse`, what it serves after close, and its burst puts (one put per sample).
"""

from __future__ import annotations

import numpy as np
import pytest
from buffer_samples import SHORT, drain, fill, ids, smp
from hypothesis import given, settings
from hypothesis import strategies as st

from melissa_trainer.buffers import FIROBuffer, ReservoirBuffer


def test_firo_random_order_is_seeded_and_exactly_once():
    orders = []
    for _ in range(2):
        buf = FIROBuffer(100, seed=7)
        fill(buf, 0, 50)
        buf.close()
        orders.append(drain(buf, 7))
    assert orders[0] == orders[1]
    assert sorted(orders[0]) == list(range(50))
    assert orders[0] != list(range(50))
    buf = FIROBuffer(100, seed=8)
    fill(buf, 0, 50)
    buf.close()
    assert drain(buf, 7) != orders[0]


# ---------------------------------------------------------------------- reservoir
def test_reservoir_blocks_only_while_nothing_drawn():
    buf = ReservoirBuffer(3, seed=0)
    fill(buf, 0, 3)
    with pytest.raises(TimeoutError, match="full"):
        buf.put(smp(3), timeout=SHORT)
    drawn = set(ids(buf.get_batch(1)))
    buf.put(smp(3), timeout=0)  # evicts the drawn sample
    st = buf.stats()
    assert (st.size, st.evicted, st.reuse_histogram) == (3, 1, {1: 1})
    buf.close()
    left = drain(buf)
    assert sorted(left) == sorted({0, 1, 2, 3} - drawn)


def test_reservoir_draws_with_replacement_and_never_evicts_unseen():
    buf = ReservoirBuffer(8, seed=3)
    seen: set[int] = set()
    counts: dict[int, int] = {}
    for i in range(200):
        try:
            buf.put(smp(i), timeout=0)
        except TimeoutError:
            batch = ids(buf.get_batch(4, timeout=0))
            seen.update(batch)
            for j in batch:
                counts[j] = counts.get(j, 0) + 1
            buf.put(smp(i), timeout=0)
    assert max(counts.values()) > 1  # re-draws happen
    buf.close()
    tail = drain(buf, 3)
    assert not set(tail) & seen
    assert seen | set(tail) == set(range(200))  # every sample served at least once


def test_reservoir_max_sample_reuse():
    buf = ReservoirBuffer(4, seed=1, max_sample_reuse=2)
    fill(buf, 0, 4)
    served: list[int] = []
    for _ in range(4):
        served += ids(buf.get_batch(2, timeout=0))
    assert sorted(served) == [0, 0, 1, 1, 2, 2, 3, 3]
    st = buf.stats()
    assert (st.size, st.evicted, st.reuse_histogram) == (0, 4, {2: 4})
    with pytest.raises(TimeoutError, match=r"no data yet \(0 samples held, 1 needed\)"):
        buf.get_batch(1, timeout=0)
    # max_sample_reuse=1: a batch never holds the same sample twice
    buf = ReservoirBuffer(4, seed=1, max_sample_reuse=1)
    fill(buf, 0, 4)
    assert sorted(ids(buf.get_batch(4))) == [0, 1, 2, 3]
    assert len(buf) == 0


def test_reservoir_after_close_serves_unseen_once_then_empty():
    buf = ReservoirBuffer(10, seed=5)
    fill(buf, 0, 10)
    drawn = set(ids(buf.get_batch(6)))
    buf.close()
    tail = drain(buf, 4)
    assert sorted(tail) == sorted(set(range(10)) - drawn)
    assert buf.get_batch(4) == []
    assert len(buf) == 10  # drawn samples stay (for rewind)


def test_max_sample_reuse_validation():
    with pytest.raises(ValueError, match="max_sample_reuse"):
        ReservoirBuffer(4, max_sample_reuse=0)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 8),
    max_reuse=st.one_of(st.none(), st.integers(1, 3)),
    ops=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=12),
)
def test_reservoir_burst_puts_are_one_put_per_sample(
    capacity: int, max_reuse: int | None, ops: list[tuple[int, int]]
) -> None:
    """A burst through `put_available` takes the same random numbers, victims, counters
    and contents as `put` sample by sample (the burst path inlines the evictions)."""
    burst = ReservoirBuffer(capacity, seed=3, max_sample_reuse=max_reuse)
    single = ReservoirBuffer(capacity, seed=3, max_sample_reuse=max_reuse)
    next_id = 0
    for n_put, n_get in ops:
        samples = [smp(i) for i in range(next_id, next_id + n_put)]
        n = burst.put_available(samples)
        k = 0
        for sample in samples:
            try:
                single.put(sample, timeout=0)
            except TimeoutError:
                break
            k += 1
        assert n == k
        next_id += n
        n_get = min(n_get, len(burst))
        if n_get:
            assert ids(burst.get_batch(n_get, timeout=0)) == ids(single.get_batch(n_get, timeout=0))
    (a_arrays, a_meta), (b_arrays, b_meta) = burst.state_dict(), single.state_dict()
    assert a_meta == b_meta
    assert a_arrays.keys() == b_arrays.keys()
    assert all(np.array_equal(a_arrays[key], b_arrays[key]) for key in a_arrays)
