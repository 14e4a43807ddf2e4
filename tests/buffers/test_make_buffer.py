"""`make_buffer` and `BufferConfig`: the kinds (any case), every problem reported by
field, the default tolerance of the rate limiter (it follows the batch, and never
starves the first read), integer-like sizes."""

from __future__ import annotations

import numpy as np
import pytest
from buffer_samples import fill, ids, smp

from melissa_trainer.buffers import (
    BufferConfig,
    FIFOBuffer,
    FIROBuffer,
    ReservoirBuffer,
    make_buffer,
)


def test_make_buffer_kinds_case_insensitive():
    assert isinstance(make_buffer(BufferConfig("FIFO", 4)), FIFOBuffer)
    assert isinstance(make_buffer(BufferConfig("Firo", 4)), FIROBuffer)
    config = BufferConfig("reservoir", 4, 2, max_sample_reuse=3, sample_to_insert_ratio=2.0)
    res = make_buffer(config)
    assert isinstance(res, ReservoirBuffer)
    assert res.capacity == 4 and res.watermark == 2 and res.max_sample_reuse == 3
    assert res.rate_limiter is not None
    assert res.rate_limiter.min_size_to_sample == 2
    assert res.rate_limiter.tolerance == config.resolved_tolerance == 2.0 * 2 + 1


def test_make_buffer_validation_messages():
    with pytest.raises(ValueError, match="kind='lifo' is not supported: choose one of fifo, firo"):
        make_buffer(BufferConfig("lifo", 4))
    with pytest.raises(ValueError, match="exactly once.*reservoir"):
        make_buffer(BufferConfig("fifo", 4, sample_to_insert_ratio=1.0))
    with pytest.raises(ValueError, match="exactly once"):
        make_buffer(BufferConfig("firo", 4, sample_to_insert_tolerance=1.0))
    with pytest.raises(ValueError, match="max_sample_reuse"):
        make_buffer(BufferConfig("firo", 4, max_sample_reuse=2))
    with pytest.raises(ValueError, match="watermark"):
        make_buffer(BufferConfig("fifo", 4, watermark=5))
    with pytest.raises(ValueError, match="watermark"):
        make_buffer(BufferConfig("fifo", 4, watermark=0))
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(BufferConfig("fifo", 0))
    with pytest.raises(ValueError, match="no effect without sample_to_insert_ratio"):
        make_buffer(BufferConfig("reservoir", 4, sample_to_insert_tolerance=3.0))
    with pytest.raises(ValueError, match="larger than max_sample_reuse=2"):
        BufferConfig("reservoir", 4, sample_to_insert_ratio=4.0, max_sample_reuse=2)
    with pytest.raises(ValueError, match="watermark"):
        FIFOBuffer(3, watermark=4)


def test_buffer_config_reports_every_problem_by_field():
    with pytest.raises(ValueError) as info:
        BufferConfig("reservoir", 5, 10, batch_size=0, sample_to_insert_ratio=-1.0)
    message = str(info.value)
    assert message.startswith("invalid BufferConfig (3 problems):")
    assert "watermark=10 is larger than capacity=5: lower watermark or raise capacity" in message
    assert "batch_size=0 must be a positive integer: set batch_size >= 1" in message
    assert "sample_to_insert_ratio=-1.0 must be > 0" in message
    # a direct constructor states the same rule in the same words
    with pytest.raises(ValueError, match="watermark=4 is larger than capacity=3"):
        FIFOBuffer(3, watermark=4)


def test_make_buffer_takes_a_config():
    with pytest.raises(TypeError, match=r"takes a BufferConfig, got str"):
        make_buffer("fifo")  # type: ignore[arg-type]
    fifo = make_buffer(BufferConfig("fifo", 8, 2, retain=True))
    assert isinstance(fifo, FIFOBuffer) and (fifo.capacity, fifo.watermark) == (8, 2)
    assert make_buffer(BufferConfig("reservoir", 8)).rate_limiter is None


def test_default_tolerance_follows_the_batch_not_the_capacity():
    # a large reservoir: the old make_buffer default, ratio + capacity = 10002, let
    # training run 10^4 draws ahead of the ratio; the default is a few batches
    config = BufferConfig("reservoir", 10_000, 1, sample_to_insert_ratio=2.0, batch_size=16,
                          batches_per_step=2)  # fmt: skip
    assert config.resolved_tolerance == 4 * 16 * 2
    limiter = make_buffer(config).rate_limiter
    assert limiter is not None and limiter.tolerance == 128.0
    # the watermark's samples may be drawn `ratio` times each at once
    config = BufferConfig("reservoir", 4000, 500, sample_to_insert_ratio=8.0, batch_size=32)
    assert config.resolved_tolerance == 8 * 500 + 32
    # never below the liveness bound of RateLimiter: ratio + batch_size
    for ratio in (0.1, 1.0, 7.5, 100.0):
        for batch_size in (1, 8, 64):
            config = BufferConfig("reservoir", 64, 1, sample_to_insert_ratio=ratio,
                                  batch_size=batch_size)  # fmt: skip
            assert config.resolved_tolerance is not None
            assert config.resolved_tolerance >= ratio + batch_size
    assert BufferConfig("reservoir", 64, sample_to_insert_ratio=1.0,
                        sample_to_insert_tolerance=40).resolved_tolerance == 40.0  # fmt: skip
    assert BufferConfig("reservoir", 64).resolved_tolerance is None


def test_a_watermark_below_the_batch_never_starves_the_first_read():
    # watermark 10, ratio 168, batch 32: the limiter frees 10 inserts and the old default
    # tolerance (168 * 10 + 32) 10 more: 20 held, the first read waits for 32 forever (a
    # stream spun at 100% CPU; found by benchmarks/active_sampling.py)
    config = BufferConfig("reservoir", 4096, 10, sample_to_insert_ratio=168.0, batch_size=32)
    assert config.resolved_tolerance == 168 * (32 - 10)
    buf = make_buffer(config)
    assert buf.put_available([smp(i) for i in range(64)]) >= 32
    assert len(buf.get_batch(32, timeout=1.0)) == 32
    # a tolerance given below it is refused, naming the fixes
    with pytest.raises(
        ValueError, match=r"ratio \* \(batch_size - watermark\)\) = 3696.*watermark"
    ):
        BufferConfig("reservoir", 4096, 10, sample_to_insert_ratio=168.0, batch_size=32,
                     sample_to_insert_tolerance=1712)  # fmt: skip


def test_integer_like_sizes_are_accepted():
    buf = make_buffer(BufferConfig("fifo", np.int64(4), np.int32(2)))  # type: ignore[arg-type]
    assert (buf.capacity, buf.watermark) == (4, 2)
    assert type(buf.capacity) is int
    fill(buf, 0, 2)
    assert ids(buf.get_batch(np.int64(2))) == [0, 1]  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch size"):
        buf.get_batch(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(BufferConfig("fifo", True))
