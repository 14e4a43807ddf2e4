"""`Buffer.stats()`: the counters, the mean age of the samples, the reservoir's
redraws."""

from __future__ import annotations

import pytest
from buffer_samples import fill

from melissa_trainer.buffers import BufferStats, FIFOBuffer, ReservoirBuffer


def test_stats_counters_and_mean_age():
    buf = FIFOBuffer(10)
    fill(buf, 0, 4)
    buf.get_batch(2)  # ages 3 and 2 (inserts after each)
    st = buf.stats()
    assert isinstance(st, BufferStats)
    assert (st.size, st.capacity, st.put, st.got, st.evicted) == (2, 10, 4, 2, 0)
    assert st.reuse_histogram == {1: 2}
    assert st.mean_age == pytest.approx(2.5)
    assert FIFOBuffer(3).stats().mean_age == 0.0


def test_reservoir_stats_count_redraws():
    buf = ReservoirBuffer(2, seed=0)
    fill(buf, 0, 2)
    for _ in range(5):
        buf.get_batch(2)
    st = buf.stats()
    assert (st.put, st.got, st.evicted, st.size) == (2, 10, 0, 2)
    assert st.reuse_histogram == {}
    assert 0.0 < st.mean_age < 1.0  # sample 0 has age 1, sample 1 age 0
