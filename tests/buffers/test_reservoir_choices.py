"""The reservoir's draw and eviction choices (`draw_choices`, `evict_choices`).

Oracles independent of the bookkeeping: with many choices a draw takes a least-drawn
sample (draws go round the held samples like epochs) and an eviction the most-drawn
one (what the reuse histogram records); with two choices, the draws of a stream are
spread more evenly over its samples than uniform draws spread them."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from melissa_trainer.buffers import BufferConfig, ColumnarReservoirBuffer, ReservoirBuffer
from melissa_trainer.buffers.reshard import share


def smp(i: int) -> dict[str, np.ndarray]:
    return {"id": np.array(i, dtype=np.int64)}


def ids(batch: list[dict[str, np.ndarray]]) -> list[int]:
    return [int(s["id"]) for s in batch]


# 400 candidates among 10 samples miss every least-drawn one with probability at most
# 0.9 ** 400 < 1e-18 per draw
MANY = 400


@pytest.mark.parametrize("cls", [ReservoirBuffer, ColumnarReservoirBuffer])
def test_many_draw_choices_draw_the_least_drawn(cls: type) -> None:
    buf = cls(10, seed=3, draw_choices=MANY)
    buf.put_available([smp(i) for i in range(10)])
    first = [i for _ in range(10) for i in ids(buf.get_batch(1))]
    assert sorted(first) == list(range(10))  # each once before any twice
    counts = dict.fromkeys(range(10), 1)
    for i in ids(buf.get_batch(10)) + ids(buf.get_batch(10)):  # within one batch too
        counts[i] += 1
    assert set(counts.values()) == {3}


@pytest.mark.parametrize("cls", [ReservoirBuffer, ColumnarReservoirBuffer])
@pytest.mark.parametrize("as_burst", [False, True])
def test_many_evict_choices_evict_the_most_drawn(cls: type, as_burst: bool) -> None:
    buf = cls(10, seed=5, evict_choices=MANY)
    buf.put_available([smp(i) for i in range(10)])
    counts = dict.fromkeys(range(10), 0)
    for _ in range(4):  # uniform draws: uneven counts
        for i in ids(buf.get_batch(10)):
            counts[i] += 1
    ranked = sorted((c for c in counts.values() if c), reverse=True)
    new = [smp(10 + k) for k in range(3)]
    if as_burst:  # `put_available`'s inlined evictions
        assert buf.put_available(new) == 3
    else:
        for s in new:
            buf.put(s, timeout=0)
    evicted = buf.stats().reuse_histogram
    # each eviction the most drawn of those left (the next on the ranking)
    expected: dict[int, int] = {}
    for c in ranked[:3]:
        expected[c] = expected.get(c, 0) + 1
    assert evicted == expected


def _spread(draw_choices: int, seed: int) -> float:
    """The standard deviation of the draws per sample of a stream of 3,000 samples
    through a reservoir of 200, 4 draws per insert, the stream's last 200 left out
    (they could not be drawn as often)."""
    buf = ReservoirBuffer(200, seed=seed, draw_choices=draw_choices)
    counts = [0] * 3000
    buf.put_available([smp(i) for i in range(200)])
    for i in range(200, 3000):
        for j in ids(buf.get_batch(4)):
            counts[j] += 1
        buf.put(smp(i), timeout=0)
    return statistics.pstdev(counts[:2800])


@pytest.mark.parametrize("seed", [0, 1])
def test_two_draw_choices_spread_the_draws_more_evenly(seed: int) -> None:
    assert _spread(2, seed) < 0.8 * _spread(1, seed)


def test_choices_are_validated_with_their_names() -> None:
    with pytest.raises(ValueError, match="draw_choices"):
        ReservoirBuffer(4, draw_choices=0)
    with pytest.raises(ValueError, match="evict_choices"):
        ReservoirBuffer(4, evict_choices=-1)
    with pytest.raises(ValueError, match="draw_choices=2 only applies to kind='reservoir'"):
        BufferConfig("fifo", 4, draw_choices=2)
    with pytest.raises(ValueError, match="evict_choices=0 must be"):
        BufferConfig("reservoir", 4, evict_choices=0)
    # a bound: each read draws batch * choices uniforms at once
    with pytest.raises(ValueError, match="draw_choices=1025 is above 1024.*set draw_choices <="):
        BufferConfig("reservoir", 4, draw_choices=1025)
    with pytest.raises(ValueError, match="evict_choices=10000000000 is above 1024"):
        ReservoirBuffer(4, evict_choices=10**10)
    assert ReservoirBuffer(4, draw_choices=1024).draw_choices == 1024


def test_a_snapshot_keeps_its_choices() -> None:
    buf = ReservoirBuffer(4, seed=1, draw_choices=2, evict_choices=3)
    buf.put_available([smp(i) for i in range(4)])
    buf.get_batch(3)
    arrays, meta = buf.state_dict()
    assert (meta["contents"]["draw_choices"], meta["contents"]["evict_choices"]) == (2, 3)
    with pytest.raises(ValueError, match="draw_choices=2, this buffer 1: resume with draw_"):
        ReservoirBuffer(4).load_state_dict(arrays, meta)
    with pytest.raises(ValueError, match="evict_choices=3, this buffer 1"):
        ReservoirBuffer(4, draw_choices=2).load_state_dict(arrays, meta)
    same = ReservoirBuffer(4, seed=9, draw_choices=2, evict_choices=3)
    same.load_state_dict(arrays, meta)
    assert ids(same.get_batch(4)) == ids(buf.get_batch(4))


def test_a_snapshot_from_before_the_choices_loads_as_uniform() -> None:
    buf = ReservoirBuffer(4, seed=1)
    buf.put_available([smp(i) for i in range(4)])
    buf.get_batch(3)
    arrays, meta = buf.state_dict()
    del meta["contents"]["draw_choices"], meta["contents"]["evict_choices"]
    old = ReservoirBuffer(4, seed=2)
    old.load_state_dict(arrays, meta)
    assert ids(old.get_batch(4)) == ids(buf.get_batch(4))
    with pytest.raises(ValueError, match="draw_choices=1, this buffer 2"):
        ReservoirBuffer(4, draw_choices=2).load_state_dict(arrays, meta)


def test_resharding_keeps_the_choices_and_refuses_ranks_that_differ() -> None:
    def snapshot(rank: int, draw_choices: int) -> tuple:
        buf = ReservoirBuffer(8, seed=rank, draw_choices=draw_choices, evict_choices=2)
        buf.put_available([smp(10 * rank + i) for i in range(8)])
        buf.get_batch(4)
        return buf.state_dict()

    arrays, meta = share([snapshot(0, 3), snapshot(1, 3)], [[], []], 0, 1, capacity=16)
    assert (meta["contents"]["draw_choices"], meta["contents"]["evict_choices"]) == (3, 2)
    ReservoirBuffer(16, draw_choices=3, evict_choices=2).load_state_dict(arrays, meta)
    with pytest.raises(ValueError, match=r"differ.*draw_choices"):
        share([snapshot(0, 3), snapshot(1, 1)], [[], []], 0, 1, capacity=16)
