"""The `RateLimiter` (the reservoir's sample-to-insert ratio): its arithmetic and
checks, inserts and reads held back (reads until close; not after a FIFO's close), and
no deadlock with the wait for the watermark."""

from __future__ import annotations

import pytest
from buffer_samples import SHORT, drain, fill, ids, smp, start

from melissa_trainer.buffers import FIFOBuffer, RateLimiter, ReservoirBuffer


def test_rate_limiter_arithmetic_and_validation():
    lim = RateLimiter(2.0, tolerance=3.0, min_size_to_sample=2)
    for _ in range(3):  # inserts below min are never held back
        assert lim.can_insert()
        lim.on_insert()
    # i=3: r*(i+1-m) - s = 4 > 3
    assert not lim.can_insert()
    assert lim.can_sample(5)  # 0 + 5 <= 2*(3-2) + 3
    assert not lim.can_sample(6)
    lim.on_sample(2)
    assert lim.can_insert()  # 4 - 2 <= 3
    for bad, words in [
        ((0, 1, 0), "samples_per_insert must be a finite number > 0, got 0"),
        ((-1, 1, 0), "samples_per_insert must be a finite number > 0, got -1"),
        ((1, -0.5, 0), "tolerance must be a finite number >= 0, got -0.5"),
        ((1, 1, -1), "min_size_to_sample must be an integer >= 0, got -1"),
        ((float("nan"), 1, 0), "samples_per_insert must be a finite number > 0, got nan"),
    ]:
        with pytest.raises(ValueError, match=words):
            RateLimiter(*bad)


def test_rate_limiter_holds_inserts_back():
    buf = ReservoirBuffer(100, rate_limiter=RateLimiter(1.0, 2.0, 2))
    fill(buf, 0, 4)  # 2 free, then r*(i+1-m) - s <= 2 up to i=4
    with pytest.raises(TimeoutError, match="rate limiter"):
        buf.put(smp(4), timeout=SHORT)
    buf.get_batch(1)
    buf.put(smp(4), timeout=0)


def test_rate_limiter_holds_reads_back_until_close():
    buf = ReservoirBuffer(100, rate_limiter=RateLimiter(1.0, 2.0, 2))
    fill(buf, 0, 4)
    drawn = set(ids(buf.get_batch(3)))  # s + n = 3 <= (4 - 2) + 2
    with pytest.raises(TimeoutError, match="rate limiter"):
        buf.get_batch(2, timeout=SHORT)
    buf.put(smp(4))
    drawn |= set(ids(buf.get_batch(2, timeout=0)))  # 5 <= (5 - 2) + 2
    with pytest.raises(TimeoutError, match="rate limiter"):
        buf.get_batch(1, timeout=0)
    buf.close()
    # limiter ignored after close: the never-drawn samples are served
    assert sorted(drain(buf, 5)) == sorted(set(range(5)) - drawn)


def test_rate_limiter_ignored_for_reads_after_close_fifo():
    buf = FIFOBuffer(10, rate_limiter=RateLimiter(0.5, 1.0, 0))
    fill(buf, 0, 2)  # third insert: 0.5 * 3 - 0 > 1
    with pytest.raises(TimeoutError, match="rate limiter"):
        buf.put(smp(2), timeout=0)
    assert ids(buf.get_batch(1)) == [0]
    buf.put(smp(2))
    with pytest.raises(TimeoutError, match="rate limiter"):
        buf.get_batch(2, timeout=0)  # 1 + 2 > 0.5 * 3 + 1
    buf.close()
    assert ids(buf.get_batch(2)) == [1, 2]


@pytest.mark.timeout(10)
def test_rate_limiter_cannot_deadlock_with_size_wait():
    # ratio 10: after 8 inserts the limiter would hold inserts back while the reader
    # still waits for 64 samples; the buffer lets inserts through (liveness).
    buf = ReservoirBuffer(100, rate_limiter=RateLimiter(10.0, 74.0, 1))
    t, box = start(buf.get_batch, 64, 5.0)
    for i in range(64):
        buf.put(smp(i), timeout=5)
    t.join(5)
    assert len(box["result"]) == 64
