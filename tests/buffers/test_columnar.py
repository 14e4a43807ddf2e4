"""`ColumnarReservoirBuffer` against the plain `ReservoirBuffer` (the oracle): the same
calls give the same samples, counters and snapshots; rows handed out never change.
Which samples it holds in columns: test_columnar_layout.py; its blocks and batches:
test_columnar_batches.py."""

from __future__ import annotations

import numpy as np
import pytest
from columnar_pairs import (
    assert_same_arrays,
    assert_same_state,
    drive_both,
    field_sample,
    plain_and_columnar,
)

from melissa_trainer.buffers import (
    ColumnarReservoirBuffer,
    RateLimiter,
    ReservoirBuffer,
    SampleBlock,
)


@pytest.mark.parametrize("reuse", [None, 2, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("choices", [(1, 1), (2, 1), (3, 4)])
def test_same_draws_puts_and_state_as_plain(
    reuse: int | None, seed: int, choices: tuple[int, int]
) -> None:
    plain, col = plain_and_columnar(
        max_sample_reuse=reuse, draw_choices=choices[0], evict_choices=choices[1]
    )
    drive_both(plain, col, seed)
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
        s = field_sample(rng, i)
        assert plain.try_put(s) == col.try_put(s)
        if len(plain) >= 8:
            try:
                a = plain.get_block(4, timeout=0)
            except TimeoutError:
                with pytest.raises(
                    TimeoutError, match=r"no data yet \(rate limiter holds reads back\)"
                ):
                    col.get_block(4, timeout=0)
                continue
            assert_same_arrays(a.fields, col.get_block(4, timeout=0).fields)
    assert_same_state(plain, col)


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
            [field_sample(rng, 30 * b + i) for i in range(int(rng.integers(1, 30)))]
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
            assert_same_arrays(a.fields, col.get_block(k, timeout=0).fields)
        monkeypatch.setattr(SampleBlock, "samples", lambda self: pytest.fail("materialized"))
        monkeypatch.setattr(SampleBlock, "__getitem__", lambda self, i: pytest.fail("indexed"))
    monkeypatch.undo()
    assert plain.rate_limiter.inserts == col.rate_limiter.inserts > 0  # type: ignore[union-attr]
    assert plain.rate_limiter.samples == col.rate_limiter.samples > 0  # type: ignore[union-attr]
    assert_same_state(plain, col)


def test_close_drain_and_rewind_as_plain() -> None:
    plain, col = plain_and_columnar()
    drive_both(plain, col, 11, n_ops=200)
    plain.close()
    col.close()
    for _ in range(2):  # the drain, then a pseudo-epoch's second drain
        while True:
            a, b = plain.get_block(6), col.get_block(6)
            assert len(a) == len(b)
            if not a:
                break
            assert_same_arrays(a.fields, b.fields)
        assert plain.rewind() == col.rewind()
    assert_same_state(plain, col)


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
    drive_both(oracle, first, 4, n_ops=150)
    first.save(tmp_path)
    resumed = target_cls(50, 8, seed=123, **choices)  # the seed is the snapshot's RNG state
    resumed.load(tmp_path)
    assert_same_state(oracle, resumed)
    drive_both(oracle, resumed, 5, n_ops=150)


def test_snapshot_owns_its_rows() -> None:
    """A snapshot taken now keeps its values after the rows are overwritten."""
    col = ColumnarReservoirBuffer(8, 8, seed=0)
    rng = np.random.default_rng(0)
    samples = [field_sample(rng, i) for i in range(8)]
    col.put_available(SampleBlock.from_samples(samples))
    arrays, _ = col.state_dict()
    # the oracle is the samples put, not the snapshot read back: an empty snapshot, or
    # one that already shared the rows, must fail too (slot -> the sample's time step)
    slots = {s: int(arrays[f"s{s}/time_step"]) for s in range(8)}
    assert sorted(slots.values()) == list(range(8))
    col.get_block(8)
    col.put_available(SampleBlock.from_samples([field_sample(rng, 100 + i) for i in range(8)]))
    for slot, t in slots.items():
        for name, value in samples[t].items():
            np.testing.assert_array_equal(arrays[f"s{slot}/{name}"], value)


def test_rows_handed_out_never_change() -> None:
    """get_batch's samples and get_block's arrays are the caller's: evicting their
    samples and overwriting the rows leaves them as they were."""
    col = ColumnarReservoirBuffer(4, 4, seed=0)
    rng = np.random.default_rng(0)
    first = [field_sample(rng, i) for i in range(4)]
    col.put_available(first)
    batch = col.get_batch(4)
    block = col.get_block(4)
    copies = [{k: v.copy() for k, v in s.items()} for s in batch]
    block_copy = {k: v.copy() for k, v in block.fields.items()}
    for i in range(40):  # every slot evicted and overwritten, many times
        col.put(field_sample(rng, 100 + i))
        col.get_block(4)
    for s, c in zip(batch, copies, strict=True):
        assert_same_arrays(s, c)
    assert_same_arrays(block.fields, block_copy)
