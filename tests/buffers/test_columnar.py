"""`ColumnarReservoirBuffer` against the plain `ReservoirBuffer` (the oracle): the same
calls give the same samples, counters and snapshots; rows handed out never change."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from melissa_trainer.buffers import (
    BufferConfig,
    ColumnarReservoirBuffer,
    RateLimiter,
    ReservoirBuffer,
    SampleBlock,
    make_buffer,
)


def _sample(rng: np.random.Generator, i: int) -> dict[str, np.ndarray]:
    return {
        "field": rng.random((3, 4)).astype(np.float32),
        "simulation_id": np.array(i % 5, dtype=np.int64),
        "time_step": np.array(i, dtype=np.int64),
        "parameters": rng.random(3),
    }


def _equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k])


def _same_state(a: ReservoirBuffer, b: ReservoirBuffer) -> None:
    (arrays_a, meta_a), (arrays_b, meta_b) = a.state_dict(), b.state_dict()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for k in arrays_a:
        np.testing.assert_array_equal(arrays_a[k], arrays_b[k])
    assert a.stats() == b.stats()


def _pair(**kwargs: object) -> tuple[ReservoirBuffer, ColumnarReservoirBuffer]:
    return ReservoirBuffer(50, 8, seed=7, **kwargs), ColumnarReservoirBuffer(
        50, 8, seed=7, **kwargs
    )  # type: ignore[arg-type]


def _drive(
    plain: ReservoirBuffer, col: ColumnarReservoirBuffer, seed: int, n_ops: int = 400
) -> None:
    """Random puts (single, try_put, lists, blocks) and reads (batches and blocks) on
    both buffers, comparing every result."""
    rng = np.random.default_rng(seed)
    i = 0
    for _ in range(n_ops):
        op = rng.integers(5)
        if op == 0:
            s = _sample(rng, i)
            assert plain.try_put(s) == col.try_put(s)
            i += 1
        elif op in (1, 2):
            batch = [_sample(rng, i + j) for j in range(int(rng.integers(1, 30)))]
            items = SampleBlock.from_samples(batch) if op == 2 else batch
            n = plain.put_available(items)
            assert col.put_available(items) == n
            i += n
        elif len(plain) >= 8:
            k = int(rng.integers(1, 9))
            if op == 3:
                a, b = plain.get_block(k, timeout=0), col.get_block(k, timeout=0)
                _equal(a.fields, b.fields)
            else:
                for x, y in zip(
                    plain.get_batch(k, timeout=0), col.get_batch(k, timeout=0), strict=True
                ):
                    _equal(x, y)
    _same_state(plain, col)


@pytest.mark.parametrize("reuse", [None, 2, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("choices", [(1, 1), (2, 1), (3, 4)])
def test_same_draws_puts_and_state_as_plain(
    reuse: int | None, seed: int, choices: tuple[int, int]
) -> None:
    plain, col = _pair(max_sample_reuse=reuse, draw_choices=choices[0], evict_choices=choices[1])
    _drive(plain, col, seed)
    assert col.columnar


def test_same_with_a_rate_limiter() -> None:
    plain = ReservoirBuffer(
        50, 8, seed=3, rate_limiter=RateLimiter(2.0, 40.0, min_size_to_sample=8)
    )
    col = ColumnarReservoirBuffer(
        50, 8, seed=3, rate_limiter=RateLimiter(2.0, 40.0, min_size_to_sample=8)
    )
    rng = np.random.default_rng(0)
    for i in range(300):
        s = _sample(rng, i)
        assert plain.try_put(s) == col.try_put(s)
        if len(plain) >= 8:
            try:
                a = plain.get_block(4, timeout=0)
            except TimeoutError:
                with pytest.raises(TimeoutError):
                    col.get_block(4, timeout=0)
                continue
            _equal(a.fields, col.get_block(4, timeout=0).fields)
    _same_state(plain, col)


@pytest.mark.parametrize("seed", [0, 1])
def test_blocks_under_a_rate_limiter_go_in_as_the_plain_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a rate limiter too, a block goes in by column (no per-sample object, even
    for the part the limiter holds back) and gives what the plain reservoir gives."""

    def pair() -> tuple[ReservoirBuffer, ColumnarReservoirBuffer]:
        return ReservoirBuffer(
            50, 8, seed=3, rate_limiter=RateLimiter(2.0, 40.0, min_size_to_sample=8)
        ), ColumnarReservoirBuffer(
            50, 8, seed=3, rate_limiter=RateLimiter(2.0, 40.0, min_size_to_sample=8)
        )

    plain, col = pair()
    rng = np.random.default_rng(seed)
    blocks = [
        SampleBlock.from_samples(
            [_sample(rng, 30 * b + i) for i in range(int(rng.integers(1, 30)))]
        )
        for b in range(60)
    ]
    reads = rng.integers(1, 9, size=len(blocks)).tolist()
    first = col.put_available(blocks[0])  # the columns exist: no sample from now on
    assert first == plain.put_available(blocks[0]) and col.columnar
    monkeypatch.setattr(SampleBlock, "samples", lambda self: pytest.fail("materialized"))
    monkeypatch.setattr(SampleBlock, "__getitem__", lambda self, i: pytest.fail("indexed"))
    for block, k in zip(blocks[1:], reads, strict=False):
        n = col.put_available(block)
        monkeypatch.undo()
        assert plain.put_available(block) == n
        try:
            a = plain.get_block(k, timeout=0)
        except TimeoutError:
            with pytest.raises(TimeoutError):
                col.get_block(k, timeout=0)
        else:
            _equal(a.fields, col.get_block(k, timeout=0).fields)
        monkeypatch.setattr(SampleBlock, "samples", lambda self: pytest.fail("materialized"))
        monkeypatch.setattr(SampleBlock, "__getitem__", lambda self, i: pytest.fail("indexed"))
    monkeypatch.undo()
    assert plain.rate_limiter.inserts == col.rate_limiter.inserts > 0  # type: ignore[union-attr]
    assert plain.rate_limiter.samples == col.rate_limiter.samples > 0  # type: ignore[union-attr]
    _same_state(plain, col)


def test_close_drain_and_rewind_as_plain() -> None:
    plain, col = _pair()
    _drive(plain, col, 11, n_ops=200)
    plain.close()
    col.close()
    for _ in range(2):  # the drain, then a pseudo-epoch's second drain
        while True:
            a, b = plain.get_block(6), col.get_block(6)
            assert len(a) == len(b)
            if not a:
                break
            _equal(a.fields, b.fields)
        assert plain.rewind() == col.rewind()
    _same_state(plain, col)


@pytest.mark.parametrize("source_cls", [ReservoirBuffer, ColumnarReservoirBuffer])
@pytest.mark.parametrize("target_cls", [ReservoirBuffer, ColumnarReservoirBuffer])
@pytest.mark.parametrize("choices", [{}, {"draw_choices": 2, "evict_choices": 3}])
def test_snapshot_resume_is_exact_across_kinds(
    source_cls: type, target_cls: type, choices: dict, tmp_path
) -> None:
    """A snapshot of either store restores into either and continues as the oracle,
    which never stopped."""
    oracle = ReservoirBuffer(50, 8, seed=7, **choices)
    first = source_cls(50, 8, seed=7, **choices)
    _drive(oracle, first, 4, n_ops=150)
    first.save(tmp_path)
    resumed = target_cls(50, 8, seed=123, **choices)  # the seed is the snapshot's RNG state
    resumed.load(tmp_path)
    _same_state(oracle, resumed)
    _drive(oracle, resumed, 5, n_ops=150)


def test_snapshot_owns_its_rows() -> None:
    """A snapshot taken now keeps its values after the rows are overwritten."""
    col = ColumnarReservoirBuffer(8, 8, seed=0)
    rng = np.random.default_rng(0)
    col.put_available(SampleBlock.from_samples([_sample(rng, i) for i in range(8)]))
    arrays, _ = col.state_dict()
    before = {k: v.copy() for k, v in arrays.items()}
    col.get_block(8)
    col.put_available(SampleBlock.from_samples([_sample(rng, 100 + i) for i in range(8)]))
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, before[k])


def test_rows_handed_out_never_change() -> None:
    """get_batch's samples and get_block's arrays are the caller's: evicting their
    samples and overwriting the rows leaves them as they were."""
    col = ColumnarReservoirBuffer(4, 4, seed=0)
    rng = np.random.default_rng(0)
    first = [_sample(rng, i) for i in range(4)]
    col.put_available(first)
    batch = col.get_batch(4)
    block = col.get_block(4)
    copies = [{k: v.copy() for k, v in s.items()} for s in batch]
    block_copy = {k: v.copy() for k, v in block.fields.items()}
    for i in range(40):  # every slot evicted and overwritten, many times
        col.put(_sample(rng, 100 + i))
        col.get_block(4)
    for s, c in zip(batch, copies, strict=True):
        _equal(s, c)
    _equal(block.fields, block_copy)


def test_a_sample_that_does_not_fit_turns_it_plain(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="melissa_trainer.buffers.columnar")
    plain, col = _pair()
    rng = np.random.default_rng(0)
    _drive(plain, col, 3, n_ops=100)
    odd = {"field": np.zeros((2, 2), np.float32), "time_step": np.array(1)}
    for b in (plain, col):
        b.put(odd)
    assert not col.columnar
    said = [r.getMessage() for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and "differ from the first" in said[0], said
    drawn = [(plain.get_batch(8), col.get_batch(8)) for _ in range(30)]
    for xs, ys in drawn:
        for x, y in zip(xs, ys, strict=True):
            _equal(x, y)
    _same_state(plain, col)
    # then the plain path again, blocks included
    block = SampleBlock.from_samples([_sample(rng, 1000 + i) for i in range(5)])
    assert plain.put_available(block) == col.put_available(block)
    _same_state(plain, col)


@pytest.mark.parametrize(
    "odd",
    [
        {"field": np.zeros((3, 4), np.float64)},  # dtype
        {"field": np.zeros((4, 3), np.float32)},  # shape
        {"other": np.zeros((3, 4), np.float32)},  # name
        {"field": [[0.0] * 4] * 3},  # not an array
    ],
)
def test_layout_changes_are_detected(odd: dict) -> None:
    col = ColumnarReservoirBuffer(10, 1, seed=0)
    col.put({"field": np.ones((3, 4), np.float32)})
    assert col.columnar
    col.put(odd)
    assert not col.columnar
    col.close()  # the drain serves each held sample once: both, as they were put
    got = col.get_batch(2)
    assert len(got) == 2 and not col.get_batch(2)
    first = next(
        s
        for s in got
        if "field" in s
        and isinstance(s["field"], np.ndarray)
        and s["field"].dtype == np.float32
        and s["field"].shape == (3, 4)
        and list(s) == ["field"]
        and (s["field"] == 1).all()
    )
    other = got[1] if got[0] is first else got[0]
    assert list(other) == list(odd)
    np.testing.assert_array_equal(
        np.asarray(other[next(iter(odd))]), np.asarray(next(iter(odd.values())))
    )


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
    plain, col = _pair()
    rng = np.random.default_rng(0)
    blocks = [
        SampleBlock.from_samples([_sample(rng, 10 * b + i) for i in range(10)]) for b in range(20)
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
    _same_state(plain, col)


@pytest.mark.parametrize("as_block", [False, True])
def test_columns_refused_by_the_system_leave_it_plain(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, as_block: bool
) -> None:
    """`capacity` rows allocated at once may be refused (overcommit) where samples one
    by one fit: the buffer then stays plain and takes every sample."""
    import melissa_trainer.buffers.columnar as columnar

    def refuse(*args: object, **kwargs: object) -> None:
        raise MemoryError("refused")

    monkeypatch.setattr(columnar, "_empty", refuse)
    caplog.set_level("INFO", logger="melissa_trainer.buffers.columnar")
    plain, col = _pair()
    rng = np.random.default_rng(0)
    batch = [_sample(rng, i) for i in range(20)]
    items = SampleBlock.from_samples(batch) if as_block else batch
    assert plain.put_available(items) == col.put_available(items) == 20
    assert not col.columnar
    said = [r.getMessage() for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and "refused" in said[0], said
    monkeypatch.undo()
    _drive(plain, col, 9, n_ops=100)
    assert not col.columnar


@pytest.mark.parametrize("as_block", [False, True])
def test_rows_above_max_row_bytes_are_held_plain_from_the_first(
    caplog: pytest.LogCaptureFixture, as_block: bool
) -> None:
    """A first sample larger than `max_row_bytes` keeps the buffer plain (a choice:
    said at debug level only), which then serves as the plain reservoir does; one of
    exactly that size is stored by column."""
    caplog.set_level("DEBUG", logger="melissa_trainer.buffers.columnar")
    row = 3 * 4 * 4 + 8 + 8 + 3 * 8  # `_sample`'s bytes: field, two ids, parameters
    rng = np.random.default_rng(0)
    batch = [_sample(rng, i) for i in range(20)]
    items = SampleBlock.from_samples(batch) if as_block else batch
    fits = ColumnarReservoirBuffer(50, 8, seed=7, max_row_bytes=row)
    assert fits.put_available(items) == 20 and fits.columnar
    plain = ReservoirBuffer(50, 8, seed=7)
    col = ColumnarReservoirBuffer(50, 8, seed=7, max_row_bytes=row - 1)
    assert plain.put_available(items) == col.put_available(items) == 20
    assert not col.columnar
    said = [r for r in caplog.records if "not by column" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "DEBUG", said
    assert f"above max_row_bytes={row - 1}" in said[0].getMessage()
    _drive(plain, col, 4, n_ops=150)
    assert not col.columnar
    with pytest.raises(ValueError, match="max_row_bytes"):
        ColumnarReservoirBuffer(50, 8, max_row_bytes=0)


def test_get_batch_hands_out_views_of_one_gathered_batch() -> None:
    """A read's samples are views of arrays gathered for it (one per field), never of
    the buffer's columns."""
    col = ColumnarReservoirBuffer(50, 8, seed=0)
    rng = np.random.default_rng(0)
    col.put_available([_sample(rng, i) for i in range(20)])
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
    col.put_available([_sample(rng, i) for i in range(20)])
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


def test_make_buffer_builds_it_for_a_reservoir_only() -> None:
    assert (
        type(make_buffer(BufferConfig("reservoir", 10, 1), columnar=True))
        is ColumnarReservoirBuffer
    )
    assert type(make_buffer(BufferConfig("reservoir", 10, 1))) is ReservoirBuffer
    bounded = make_buffer(BufferConfig("reservoir", 10, 1), columnar=True, max_row_bytes=8)
    assert bounded._max_row_bytes == 8  # type: ignore[attr-defined]
    assert type(make_buffer(BufferConfig("fifo", 10, 1), columnar=True)).__name__ == "FIFOBuffer"


def test_a_batch_s_simulation_ids_from_its_block_equal_the_samples_ids() -> None:
    """The trainer reads each batch's simulation ids (the loss guard names them): from
    a columnar read, by the column of the gathered batch (`BlockViews`), not sample by
    sample. The same ids as sample by sample, in order, batch after batch while puts
    evict; once the list is changed, read sample by sample again."""
    from melissa_trainer.buffers.block import BlockViews
    from melissa_trainer.core.dataset import simulation_ids

    col = ColumnarReservoirBuffer(40, 8, seed=3)
    rng = np.random.default_rng(3)
    for r in range(30):
        col.put_available([_sample(rng, 100 * r + i) for i in range(int(rng.integers(1, 12)))])
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
        samples = [_sample(rng, 100 * r + i) for i in range(int(rng.integers(1, 12)))]
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
            _equal(x, y)
    assert not b.columnar
    _same_state(a, b)
    for buffer in (a, b):
        buffer.close()
    while a.get_batch(8):
        assert b.get_batch_or_block(8)
    assert b.get_batch_or_block(8) == []
    _same_state(a, b)


def test_a_plain_buffer_s_get_batch_or_block_is_its_get_batch() -> None:
    plain, twin = ReservoirBuffer(20, 4, seed=1), ReservoirBuffer(20, 4, seed=1)
    rng = np.random.default_rng(1)
    samples = [_sample(rng, i) for i in range(10)]
    plain.put_available(samples)
    twin.put_available(samples)
    got = plain.get_batch_or_block(5)
    assert type(got) is list
    for x, y in zip(twin.get_batch(5), got, strict=True):
        assert x is y
