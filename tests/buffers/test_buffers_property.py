"""Property tests (hypothesis) of the buffer invariants, single-threaded and threaded."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from melissa_trainer.buffers import (
    Buffer,
    BufferClosedError,
    BufferConfig,
    RateLimiter,
    ReservoirBuffer,
    make_buffer,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
THREADED = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def smp(i: int) -> dict[str, np.ndarray]:
    return {"id": np.array(i, dtype=np.int64)}


def ids(batch: list[dict[str, np.ndarray]]) -> list[int]:
    return [int(s["id"]) for s in batch]


# operations: ("put",) or ("get", n)
def ops_strategy(max_n: int) -> st.SearchStrategy[list[tuple]]:
    put = st.just(("put",))
    op = st.one_of(put, put, st.tuples(st.just("get"), st.integers(1, max_n)))  # 2/3 puts
    return st.lists(op, min_size=5, max_size=150)


def run_ops(buf: Buffer, ops: list[tuple], on_batch=None) -> tuple[list[int], int]:
    """Apply ops without ever blocking; return (served ids, number inserted)."""
    served: list[int] = []
    next_id = 0
    for op in ops:
        if op[0] == "put":
            try:
                buf.put(smp(next_id), timeout=0)
                next_id += 1
            except TimeoutError:
                pass
        else:
            try:
                batch = ids(buf.get_batch(op[1], timeout=0))
            except TimeoutError:
                continue
            assert len(batch) == op[1]
            if on_batch is not None:
                on_batch(batch)
            served += batch
        assert len(buf) <= buf.capacity
    return served, next_id


@FAST
@given(
    kind=st.sampled_from(["fifo", "firo"]),
    capacity=st.integers(1, 12),
    data=st.data(),
)
def test_serve_once_buffers_lose_nothing_and_serve_exactly_once(kind, capacity, data):
    watermark = data.draw(st.integers(1, capacity))
    ops = data.draw(ops_strategy(capacity))
    buf = make_buffer(BufferConfig(kind, capacity, watermark, seed=data.draw(st.integers(0, 3))))
    served, inserted = run_ops(buf, ops)
    buf.close()
    with pytest.raises(BufferClosedError, match="on a closed buffer"):
        buf.put(smp(-1))
    while batch := buf.get_batch(capacity):
        served += ids(batch)
    assert buf.get_batch(1) == []
    assert sorted(served) == list(range(inserted))  # nothing lost, nothing twice
    if kind == "fifo":
        assert served == list(range(inserted))
    st_ = buf.stats()
    assert (st_.put, st_.got, st_.size, st_.evicted) == (inserted, inserted, 0, 0)


@FAST
@given(kind=st.sampled_from(["fifo", "firo"]), capacity=st.integers(1, 8), data=st.data())
def test_rewind_serves_every_retained_sample_once_more(kind, capacity, data):
    ops = data.draw(ops_strategy(capacity))
    buf = make_buffer(BufferConfig(kind, capacity, retain=True))
    served, inserted = run_ops(buf, ops)
    count = buf.rewind()
    assert count == len(served)
    assert len(buf) <= capacity + count  # overfill only by what was re-queued
    buf.close()
    again: list[int] = []
    while batch := buf.get_batch(capacity):
        again += ids(batch)
    assert sorted(again) == sorted(served + list(set(range(inserted)) - set(served)))
    if kind == "fifo":
        held = [i for i in range(inserted) if i not in set(served)]
        assert again == held + served


@FAST
@given(
    capacity=st.integers(1, 10),
    max_reuse=st.one_of(st.none(), st.integers(1, 4)),
    seed=st.integers(0, 5),
    choices=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    data=st.data(),
)
def test_reservoir_never_evicts_an_undrawn_sample(capacity, max_reuse, seed, choices, data):
    ops = data.draw(ops_strategy(capacity))
    buf = ReservoirBuffer(
        capacity,
        seed=seed,
        max_sample_reuse=max_reuse,
        draw_choices=choices[0],
        evict_choices=choices[1],
    )
    counts: dict[int, int] = {}

    def check(batch: list[int]) -> None:
        for i in batch:
            counts[i] = counts.get(i, 0) + 1
        if max_reuse == 1:
            assert len(set(batch)) == len(batch)

    served, inserted = run_ops(buf, ops, check)
    buf.close()
    tail: list[int] = []
    while batch := buf.get_batch(capacity):
        tail += ids(batch)
    # after close: exactly the never-drawn samples, each once
    assert len(tail) == len(set(tail))
    assert not set(tail) & set(counts)
    assert set(counts) | set(tail) == set(range(inserted))  # no unseen sample lost
    for i in tail:
        counts[i] = counts.get(i, 0) + 1
    if max_reuse is not None:
        assert max(counts.values(), default=0) <= max_reuse
    stats = buf.stats()
    assert stats.got == sum(counts.values())
    assert stats.put == inserted
    assert stats.size + stats.evicted == inserted
    assert sum(stats.reuse_histogram.values()) == stats.evicted
    assert 0 not in stats.reuse_histogram


@FAST
@given(kind=st.sampled_from(["fifo", "firo", "reservoir"]), data=st.data())
def test_state_dict_round_trip_any_point(kind, data):
    capacity = data.draw(st.integers(1, 8))
    ops = data.draw(ops_strategy(capacity))
    split = data.draw(st.integers(0, len(ops)))
    kw: dict = {"retain": True}
    if kind == "reservoir":
        kw = {"max_sample_reuse": 3, "draw_choices": data.draw(st.integers(1, 3)),
              "evict_choices": data.draw(st.integers(1, 3))}  # fmt: skip
    a = make_buffer(BufferConfig(kind, capacity, seed=1, **kw))
    run_ops(a, ops[:split])
    b = make_buffer(BufferConfig(kind, capacity, seed=99, **kw))
    b.load_state_dict(*a.state_dict())
    rest_a = run_ops(a, ops[split:])
    rest_b = run_ops(b, ops[split:])
    assert rest_a == rest_b
    assert a.stats() == b.stats()


# ---------------------------------------------------------------------- threads
@pytest.mark.timeout(60)
@THREADED
@given(
    kind=st.sampled_from(["fifo", "firo", "reservoir"]),
    capacity=st.integers(1, 16),
    producers=st.integers(1, 3),
    consumers=st.integers(1, 3),
    per_producer=st.integers(0, 200),
    use_limiter=st.booleans(),
    data=st.data(),
)
def test_concurrent_producers_consumers(
    kind, capacity, producers, consumers, per_producer, use_limiter, data
):
    watermark = data.draw(st.integers(1, capacity))
    sizes = [data.draw(st.integers(1, capacity)) for _ in range(consumers)]
    limiter = None
    if use_limiter:
        ratio = data.draw(st.sampled_from([0.5, 1.0, 2.0]))
        limiter = RateLimiter(ratio, ratio + capacity, min_size_to_sample=watermark)
    buf: Buffer
    if kind == "reservoir":
        buf = ReservoirBuffer(capacity, watermark, rate_limiter=limiter, max_sample_reuse=3)
    else:
        buf = make_buffer(BufferConfig(kind, capacity, watermark))
    results: list[list[int]] = [[] for _ in range(consumers)]
    errors: list[BaseException] = []

    def produce(p: int) -> None:
        try:
            for k in range(per_producer):
                buf.put(smp(p * 1000 + k), timeout=10)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def consume(c: int) -> None:
        try:
            while batch := buf.get_batch(sizes[c], timeout=10):
                results[c] += ids(batch)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    prod = [threading.Thread(target=produce, args=(p,), daemon=True) for p in range(producers)]
    cons = [threading.Thread(target=consume, args=(c,), daemon=True) for c in range(consumers)]
    for t in prod + cons:
        t.start()
    for t in prod:
        t.join(20)
    assert not any(t.is_alive() for t in prod), "producers deadlocked"
    buf.close()
    for t in cons:
        t.join(20)
    assert not any(t.is_alive() for t in cons), "consumers deadlocked"
    assert not errors, errors

    expected = {p * 1000 + k for p in range(producers) for k in range(per_producer)}
    everything = [i for r in results for i in r]
    assert buf.stats().got == len(everything)
    if kind == "reservoir":
        assert set(everything) == expected  # every sample served at least once
        if everything:
            assert np.bincount(np.array(everything, dtype=np.int64)).max() <= 3
    else:
        assert sorted(everything) == sorted(expected)  # exactly once
        if kind == "fifo" and consumers == 1:
            for p in range(producers):  # each producer's samples in its order
                mine = [i for i in everything if i // 1000 == p]
                assert mine == sorted(mine)
