"""A burst of puts into a reservoir (`put_available` of a list or a `SampleBlock`) against
the same samples put one at a time (the oracle): the same victims, in the same order,
the same random numbers used, the same state and checkpoint, the same draws afterwards.

The oracle is `Buffer.put_available`'s generic loop: one `ReservoirBuffer._insert` per
sample, which evicts with one uniform (``evict_choices`` of them) per sample. The bursts
(`_insert_slots`, `_evict_slots`, `_slots.evict_drawn`) share none of that code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from melissa_trainer.buffers import (
    Buffer,
    ColumnarReservoirBuffer,
    ReservoirBuffer,
    Sample,
    SampleBlock,
)
from melissa_trainer.buffers.columnar import _Row
from melissa_trainer.core.device_buffer import DeviceReservoirBuffer


class OneByOne(ReservoirBuffer):
    """The oracle: every put is one `_insert` per sample (`Buffer`'s loop)."""

    def put_available(self, samples: Sequence[Sample]) -> int:
        return Buffer.put_available(self, list(samples))


def _sample(rng: np.random.Generator, i: int) -> dict[str, np.ndarray]:
    return {
        "u": rng.random(3).astype(np.float32),
        "time_step": np.array(i, dtype=np.int64),
        "parameters": np.zeros(0),  # a field of no elements, as a client's without any
    }


def _same_batch(want: list[Sample], got: list[Sample] | SampleBlock) -> None:
    """The same samples, in order (compared field by field over the whole batch)."""
    assert len(got) == len(want)
    if not want:
        return
    fields = got.fields if isinstance(got, SampleBlock) else SampleBlock.from_samples(got).fields
    expected = SampleBlock.from_samples(want).fields
    assert list(fields) == list(expected)
    for k, v in expected.items():
        assert fields[k].dtype == v.dtype and fields[k].shape == v.shape, k
        assert np.array_equal(fields[k], v), k


def _same_state(oracle: ReservoirBuffer, other: ReservoirBuffer) -> None:
    (arrays_a, meta_a), (arrays_b, meta_b) = oracle.state_dict(), other.state_dict()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for k, a in arrays_a.items():
        b = arrays_b[k]
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), k
    assert oracle.stats() == other.stats()
    assert oracle.room() == other.room()
    # the index lists themselves, in order (the snapshot has them; this says where)
    for name in ("_undrawn", "_drawn", "_free", "_draws", "_ins", "_pos"):
        assert getattr(oracle, name) == getattr(other, name), name
    assert oracle._rng.bit_generator.state == other._rng.bit_generator.state


def _kinds(capacity: int, **kw: object) -> list[ReservoirBuffer]:
    return [
        OneByOne(capacity, 1, seed=11, **kw),  # type: ignore[arg-type]
        ReservoirBuffer(capacity, 1, seed=11, **kw),  # type: ignore[arg-type]
        ColumnarReservoirBuffer(capacity, 1, seed=11, **kw),  # type: ignore[arg-type]
        DeviceReservoirBuffer(capacity, 1, seed=11, device="cpu", **kw),  # type: ignore[arg-type]
    ]


def _drive(bufs: list[ReservoirBuffer], seed: int, capacity: int, n_ops: int) -> dict[str, int]:
    """Random bursts and reads on every buffer, comparing each result with the oracle's
    (`bufs[0]`); returns how often the cases that matter came up."""
    oracle, plain, col, dev = bufs
    rng = np.random.default_rng(seed)
    seen = {"fill_and_evict": 0, "evict": 0, "refused": 0, "reused_free": 0}
    i = 0
    for _ in range(n_ops):
        if rng.random() < 0.5:
            k = int(rng.integers(1, 2 * capacity + 2))
            batch = [_sample(rng, i + j) for j in range(k)]
            room = capacity - len(oracle)  # free and never used slots
            free = len(oracle._free)
            n = oracle.put_available(batch)
            assert plain.put_available(batch) == n
            assert col.put_available(SampleBlock.from_samples(batch)) == n
            assert (
                dev.put_available(batch if rng.random() < 0.5 else SampleBlock.from_samples(batch))
                == n
            )
            seen["fill_and_evict"] += 0 < room < n
            seen["evict"] += n > room
            seen["refused"] += n < k
            seen["reused_free"] += free > 0 and n > 0
            i += k
        elif len(oracle):
            k = int(rng.integers(1, len(oracle) + 1))
            want = oracle.get_batch(k, timeout=0)
            for other in (plain, dev):
                _same_batch(want, other.get_batch(k, timeout=0))
            _same_batch(want, col.get_block(k, timeout=0))
        if rng.random() < 0.1:
            for other in (plain, col, dev):
                _same_state(oracle, other)
    return seen


def _check_end(bufs: list[ReservoirBuffer]) -> None:
    oracle, *others = bufs
    for other in others:
        _same_state(oracle, other)
    col = bufs[2]
    assert isinstance(col, ColumnarReservoirBuffer) and col.columnar
    for slot in col._undrawn + col._drawn:  # a held slot is its row (a victim's stays so)
        row = col._slots[slot]
        assert type(row) is _Row and row.slot == slot
    # the next draws, then a close and its drain
    for k in (1, 5, oracle.capacity):
        if len(oracle):
            k = min(k, len(oracle))
            want = oracle.get_batch(k, timeout=0)
            for other in others:
                _same_batch(want, other.get_batch(k, timeout=0))
    for buf in bufs:
        buf.close()
    while want := oracle.get_batch(oracle.capacity, timeout=0):
        for other in others:
            _same_batch(want, other.get_batch(oracle.capacity, timeout=0))
    for other in others:
        assert other.get_batch(other.capacity, timeout=0) == []
        _same_state(oracle, other)


OPTIONS = {
    "uniform": {},
    "reuse1": {"max_sample_reuse": 1},
    "reuse3": {"max_sample_reuse": 3},
    "evict2": {"evict_choices": 2},
    "evict5-draw3": {"evict_choices": 5, "draw_choices": 3},
    "draw2-reuse2": {"draw_choices": 2, "max_sample_reuse": 2},
}
#: the capacities: none free after one sample, two, a few, many (the largest, the
#: costliest: in the inner tier with the uniform options only)
CAPACITIES = (1, 2, 7, 40)


def grid() -> list[object]:
    """Every option set at every capacity; the inner tier runs each option set at the
    three small capacities, where the blocks fill up and evict within a few puts, and at
    40 the uniform one only: the other five carry the ``e2e`` marker (the full suite runs
    all 24; those five are its costliest cases)."""
    return [
        pytest.param(
            options, capacity, id=f"{name}-{capacity}",
            marks=pytest.mark.e2e if capacity == 40 and name != "uniform" else (),
        )
        for name, options in OPTIONS.items()
        for capacity in CAPACITIES
    ]  # fmt: skip


@pytest.mark.parametrize(("options", "capacity"), grid())
def test_bursts_are_one_put_per_sample(capacity: int, options: dict) -> None:
    totals = dict.fromkeys(("fill_and_evict", "evict", "refused", "reused_free"), 0)
    for seed in range(6):
        bufs = _kinds(capacity, **options)
        for key, count in _drive(bufs, seed, capacity, n_ops=120).items():
            totals[key] += count
        _check_end(bufs)
    # the cases the bursts must get right came up (an eviction needs a drawn sample
    # held: never with max_sample_reuse=1, where a drawn sample leaves; a block that
    # fills the last free slots and then evicts needs room left too: not at capacity 1)
    assert totals["refused"]
    if options.get("max_sample_reuse") != 1:
        assert totals["evict"]
        if capacity > 1:
            assert totals["fill_and_evict"]
    if "max_sample_reuse" in options:
        assert totals["reused_free"]


def test_a_long_stream_of_receiver_blocks() -> None:
    """The pinned row's shape, scaled down: blocks of 63 into a full reservoir of 256,
    64 draws between them, for long enough that every slot is evicted many times."""
    bufs = _kinds(256)
    rng = np.random.default_rng(5)
    oracle, plain, col, dev = bufs
    i = 0
    for step in range(300):
        batch = [_sample(rng, i + j) for j in range(63)]
        i += 63
        n = oracle.put_available(batch)
        assert plain.put_available(batch) == n
        assert col.put_available(SampleBlock.from_samples(batch)) == n
        assert dev.put_available(SampleBlock.from_samples(batch)) == n
        k = min(64, len(oracle))
        want = oracle.get_batch(k, timeout=0)
        _same_batch(want, col.get_block(k, timeout=0))
        for other in (plain, dev):
            _same_batch(want, other.get_batch(k, timeout=0))
        if step % 50 == 0:
            for other in (plain, col, dev):
                _same_state(oracle, other)
    assert oracle.stats().evicted > 10 * 256
    _check_end(bufs)
