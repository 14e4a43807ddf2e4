"""Blocks and batches of a `ColumnarReservoirBuffer`: blocks put while reading stay
consistent and go in without per-sample objects; `get_batch` hands out views of one
gathered batch, made outside the lock; `get_batch_or_block` reads what `get_batch` reads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from columnar_pairs import assert_same_arrays, assert_same_state, field_sample, plain_and_columnar

from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, SampleBlock


def test_blocks_put_while_reading_stay_consistent() -> None:
    """A reader thread drawing blocks while a writer puts blocks: every row read is
    one that was put whole (its field holds its time step everywhere)."""
    col = ColumnarReservoirBuffer(64, 16, seed=0)
    stop = threading.Event()
    errors: list[str] = []

    def read() -> None:
        while not stop.is_set():
            try:
                block = col.get_block(16, timeout=0.05)
            except TimeoutError:
                continue
            if not block:
                return
            f, t = block.fields["field"], block.fields["time_step"]
            if not (f == t[:, None].astype(np.float32)).all():
                errors.append("a torn row")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for lo in range(0, 5000, 50):
            t = np.arange(lo, lo + 50)
            block = SampleBlock(
                {"field": np.repeat(t[:, None], 8, 1).astype(np.float32), "time_step": t}
            )
            done = 0
            while done < 50:
                done += col.put_available(block[done:])
    finally:
        col.close()
        stop.set()
        reader.join(10)
    assert not reader.is_alive() and not errors


def test_a_block_goes_in_without_per_sample_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block path scatters rows: it never materializes the block's samples (the
    plain reservoir's way in), yet stores what the plain one stores."""
    plain, col = plain_and_columnar()
    rng = np.random.default_rng(0)
    blocks = [
        SampleBlock.from_samples([field_sample(rng, 10 * b + i) for i in range(10)])
        for b in range(20)
    ]
    for block in blocks:  # the oracle, before materializing is forbidden
        n = plain.put_available(block)
        if len(plain) >= 8:
            plain.get_block(8)
    monkeypatch.setattr(SampleBlock, "samples", lambda self: pytest.fail("materialized"))
    monkeypatch.setattr(SampleBlock, "__getitem__", lambda self, i: pytest.fail("indexed"))
    for block in blocks:
        n = col.put_available(block)
        assert n > 0
        if len(col) >= 8:
            col.get_block(8)
    monkeypatch.undo()
    assert_same_state(plain, col)


def test_get_batch_hands_out_views_of_one_gathered_batch() -> None:
    """A read's samples are views of arrays gathered for it (one per field), never of
    the buffer's columns."""
    col = ColumnarReservoirBuffer(50, 8, seed=0)
    rng = np.random.default_rng(0)
    col.put_available([field_sample(rng, i) for i in range(20)])
    batch = col.get_batch(6)
    for name in batch[0]:
        base = batch[0][name].base
        assert base is not None and all(s[name].base is base for s in batch)
        assert not np.shares_memory(base, col._columns[name])


def test_get_batch_makes_its_views_outside_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the gather holds the buffer's lock: the per-sample views of a read are made
    after it is released (a put waiting on the lock waits for the gather only)."""
    col = ColumnarReservoirBuffer(50, 8, seed=0)
    rng = np.random.default_rng(0)
    col.put_available([field_sample(rng, i) for i in range(20)])
    held: list[bool] = []
    views = SampleBlock.views

    def watched(block: SampleBlock) -> list:
        free = col._lock.acquire(blocking=False)
        if free:
            col._lock.release()
        held.append(not free)
        return views(block)

    monkeypatch.setattr(SampleBlock, "views", watched)
    assert len(col.get_batch(6)) == 6
    assert held == [False]


def test_a_batch_s_simulation_ids_from_its_block_equal_the_samples_ids() -> None:
    """The trainer reads each batch's simulation ids (the loss guard names them): from
    a columnar read, by the column of the gathered batch (`BlockViews`), not sample by
    sample. The same ids as sample by sample, in order, batch after batch while puts
    evict; once the list is changed, read sample by sample again."""
    from melissa_trainer.buffers.block import BlockViews
    from melissa_trainer.core.simulation_ids import simulation_ids

    col = ColumnarReservoirBuffer(40, 8, seed=3)
    rng = np.random.default_rng(3)
    for r in range(30):
        col.put_available([field_sample(rng, 100 * r + i) for i in range(int(rng.integers(1, 12)))])
        batch = col.get_batch(int(rng.integers(1, 9)))
        assert type(batch) is BlockViews
        per_sample = [int(s["simulation_id"]) for s in batch]
        assert simulation_ids(batch).tolist() == per_sample
        assert simulation_ids(list(batch)).tolist() == per_sample  # the plain path
    batch = col.get_batch(6)
    ids = [int(s["simulation_id"]) for s in batch]
    batch.pop(2)  # no longer the block's rows: per sample
    assert simulation_ids(batch).tolist() == ids[:2] + ids[3:]


def test_get_batch_or_block_reads_what_get_batch_reads() -> None:
    """`get_batch_or_block` (the trainer's read when it has a `process_sample`) draws as
    `get_batch` does: twin buffers, fed alike, one read by each, give the same samples
    (the block's views, field order, 0-d ids and all), counters and state, while the
    samples are stored by column (a block) and once plain (the held dicts, a list),
    down to the end of the stream ([])."""
    a, b = ColumnarReservoirBuffer(40, 8, seed=5), ColumnarReservoirBuffer(40, 8, seed=5)
    rng = np.random.default_rng(5)
    for r in range(40):
        samples = [field_sample(rng, 100 * r + i) for i in range(int(rng.integers(1, 12)))]
        if r == 30:  # a sample of another layout: plain from here on
            samples.insert(0, {"other": np.zeros(2)})
        assert a.put_available(samples) == b.put_available(samples)
        k = int(rng.integers(1, 9))
        got = b.get_batch_or_block(k, timeout=0)
        assert (type(got) is SampleBlock) == (r < 30) == a.columnar == b.columnar
        views = got.views() if isinstance(got, SampleBlock) else got
        expected = a.get_batch(k, timeout=0)
        assert len(views) == len(expected) == k
        for x, y in zip(expected, views, strict=True):
            assert_same_arrays(x, y)
    assert not b.columnar
    assert_same_state(a, b)
    for buffer in (a, b):
        buffer.close()
    while a.get_batch(8):
        assert b.get_batch_or_block(8)
    assert b.get_batch_or_block(8) == []
    assert_same_state(a, b)


def test_a_plain_buffer_s_get_batch_or_block_is_its_get_batch() -> None:
    plain, twin = ReservoirBuffer(20, 4, seed=1), ReservoirBuffer(20, 4, seed=1)
    rng = np.random.default_rng(1)
    samples = [field_sample(rng, i) for i in range(10)]
    plain.put_available(samples)
    twin.put_available(samples)
    got = plain.get_batch_or_block(5)
    assert type(got) is list
    for x, y in zip(twin.get_batch(5), got, strict=True):
        assert x is y
