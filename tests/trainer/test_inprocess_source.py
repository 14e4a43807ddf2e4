"""`IterableSource` fills the buffer in the reader's thread, by a rule on the buffer's
state only (so runs are reproducible), and `Buffer.try_put` serves such a producer as
a blocked `put` in a thread would be served."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import (
    FIFOBuffer,
    IterableSource,
    OnlineTrainer,
    ReservoirBuffer,
    SourceError,
    StreamDataset,
    TrainingArguments,
)
from melissa_trainer.buffers import BufferClosedError, RateLimiter

pytestmark = pytest.mark.timeout(60)


def sample(i: int) -> dict[str, np.ndarray]:
    return {"x": np.full(3, i, dtype=np.float32), "y": np.asarray(float(i), dtype=np.float32)}


def test_the_iterable_runs_in_the_readers_thread_only_as_far_as_the_buffer_needs() -> None:
    threads: list[int] = []

    def produce() -> Iterator[dict[str, np.ndarray]]:
        for i in range(100):
            threads.append(threading.get_ident())
            yield sample(i)

    buffer = FIFOBuffer(capacity=8, watermark=2)
    source = IterableSource(produce())
    dataset = StreamDataset(buffer, batch_size=4, source=source)
    source.start(buffer, 0, 1)
    assert threads == [] and len(buffer) == 0  # nothing before the reader asks
    assert dataset.prefetch(1) == 1
    # filled to capacity (8), one more taken and refused (held for later), 4 read
    assert len(threads) == 9 and len(buffer) == 4
    assert dataset.prefetch(3) == 3
    assert len(threads) == 17 and len(buffer) == 4
    assert set(threads) == {threading.get_ident()}
    source.stop()


def test_resume_skips_what_the_buffer_already_received() -> None:
    buffer = FIFOBuffer(capacity=4)
    for i in range(6):  # as restored from a checkpoint: 6 received, 4 of them read
        buffer.put(sample(i))
        if i in (1, 3):
            buffer.get_batch(2)
    source = IterableSource([sample(i) for i in range(10)])
    source.start(buffer, 0, 1)
    source.wait_for(4, 0.0)
    assert [int(s["y"]) for s in buffer.get_batch(4)] == [4, 5, 6, 7]


def test_a_failing_iterable_raises_from_wait_for_and_closes_the_buffer() -> None:
    def broken() -> Iterator[dict[str, np.ndarray]]:
        yield sample(0)
        raise ValueError("bad solver input")

    buffer = FIFOBuffer(capacity=4)
    source = IterableSource(broken())
    source.start(buffer, 0, 1)
    with pytest.raises(SourceError, match="bad solver input"):
        source.wait_for(1, 0.0)
    assert buffer.closed
    with pytest.raises(SourceError, match="bad solver input"):  # and at any later call
        source.wait_for(1, 0.0)
    with pytest.raises(SourceError, match="bad solver input"):
        source.wait_for(1, 0.02)


def test_try_put_refused_for_room_lets_reads_pass_the_rate_limiter() -> None:
    # a reservoir full of undrawn samples, and a limiter that wants inserts before reads
    limiter = RateLimiter(samples_per_insert=0.25, tolerance=0.0, min_size_to_sample=4)
    buffer = ReservoirBuffer(4, watermark=4, rate_limiter=limiter)
    assert all(buffer.try_put(sample(i)) for i in range(4))
    with pytest.raises(TimeoutError, match=r"no data yet \(rate limiter holds reads back\)"):
        buffer.get_batch(2, timeout=0)  # nobody waits for room yet: the limiter holds
    assert buffer.try_put(sample(4)) is False  # full, nothing drawn: refused, parked
    assert len(buffer.get_batch(2, timeout=0)) == 2  # as for a put blocked in a thread
    assert buffer.try_put(sample(4)) is True  # a drawn sample is evicted
    with pytest.raises(
        TimeoutError, match=r"no data yet \(rate limiter holds reads back\)"
    ):  # no longer parked: the limiter holds reads again
        buffer.get_batch(2, timeout=0)
    buffer.close()
    with pytest.raises(BufferClosedError, match="on a closed buffer"):
        buffer.try_put(sample(5))


def test_a_rate_limited_reservoir_fed_in_process_trains_to_the_end(tmp_path: Path) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="reservoir",
        buffer_size=16,
        watermark=8,
        sample_to_insert_ratio=0.5,  # fewer draws than inserts: room runs short
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=linear_samples(200), process_sample=xy
    )
    state = trainer.train()
    assert state.stream_ended and trainer.buffer.stats().put == 200


def test_a_limiter_that_holds_both_sides_back_is_an_error_not_a_hang() -> None:
    # tolerance 0 (TrainingArguments refuses it): no insert and no read is ever allowed
    limiter = RateLimiter(samples_per_insert=1.0, tolerance=0.0, min_size_to_sample=0)
    buffer = ReservoirBuffer(8, watermark=2, rate_limiter=limiter)
    source = IterableSource([sample(i) for i in range(10)])
    dataset = StreamDataset(buffer, batch_size=2, source=source)
    source.start(buffer, 0, 1)
    with pytest.raises(SourceError, match="sample_to_insert_tolerance"):
        dataset.prefetch(1)


@pytest.mark.parametrize("world_size", [1, 2])
def test_a_watermark_above_a_sized_stream_is_said_as_the_source_starts(
    world_size: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Melissa refuses per_server_watermark above the samples per server at start; here
    only the end-of-run reuse line said it, after the run had waited (hmelissa2). A
    rank's iterable with a length is known at start: the warning names the field, the
    numbers and the fix before anything is read."""
    buffer = FIFOBuffer(capacity=64, watermark=20)
    source = IterableSource(lambda rank, world: [sample(i) for i in range(12)])
    with caplog.at_level("WARNING", logger="melissa_trainer.sources.source"):
        source.start(buffer, world_size - 1, world_size)
    said = [r.getMessage() for r in caplog.records]
    who = "rank 1's train_source" if world_size > 1 else "train_source"
    assert len(said) == 1 and said[0].startswith(
        f"{who} holds 12 samples, fewer than --watermark 20"
    )
    assert "Lower --watermark (well below 12)" in said[0] and len(buffer) == 0
    source.stop()


def test_a_reachable_or_unknown_watermark_is_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    """A length at or above the watermark, or none known (a generator), says nothing."""
    with caplog.at_level("WARNING", logger="melissa_trainer.sources.source"):
        for data in ([sample(i) for i in range(20)], (sample(i) for i in range(3))):
            source = IterableSource(data)
            source.start(FIFOBuffer(capacity=64, watermark=20), 0, 1)
            source.stop()
    assert caplog.records == []


def test_an_empty_share_is_said_as_empty_not_as_a_watermark_to_lower(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """hrev17: a factory whose share for a rank is empty (``data[rank::world]`` of one
    sample on 2 ranks) was told to 'Lower --watermark (well below 0)', at any watermark,
    1 included: no watermark helps a rank with nothing to train on."""
    buffer = FIFOBuffer(capacity=64, watermark=1)
    source = IterableSource(lambda rank, world: [sample(0)][rank::world])
    with caplog.at_level("WARNING", logger="melissa_trainer.sources.source"):
        source.start(buffer, 1, 2)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("rank 1's train_source holds no sample")
    assert "--watermark" not in said[0]
    source.stop()
