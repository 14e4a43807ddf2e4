"""Unit tests of melissa_trainer.buffers (semantics, blocking, checkpoints)."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from melissa_trainer.buffers import (
    Buffer,
    BufferClosedError,
    BufferConfig,
    BufferStats,
    FIFOBuffer,
    FIROBuffer,
    RateLimiter,
    ReservoirBuffer,
    make_buffer,
)

KINDS = ["fifo", "firo", "reservoir"]
SHORT = 0.05  # seconds: timeouts that are expected to expire


def smp(i: int) -> dict[str, np.ndarray]:
    return {"id": np.array(i, dtype=np.int64), "x": np.full(3, i, dtype=np.float32)}


def ids(batch: list[dict[str, np.ndarray]]) -> list[int]:
    return [int(s["id"]) for s in batch]


def fill(buf: Buffer, start: int, stop: int) -> None:
    for i in range(start, stop):
        buf.put(smp(i), timeout=1)


def drain(buf: Buffer, n: int = 1) -> list[int]:
    out: list[int] = []
    while batch := buf.get_batch(n, timeout=1):
        out += ids(batch)
    return out


def start(target, *args) -> tuple[threading.Thread, dict]:
    """Run target in a daemon thread; the dict receives 'result' or 'error'."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = target(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def wait_blocked(buf, puts: int = 0, reads: int = 0, timeout: float = 5.0) -> None:
    """Until `puts` puts and `reads` reads are blocked in `buf` (`Buffer.waiting`: the
    calls registered as waiters under the lock before sleeping), or fail."""
    deadline = time.monotonic() + timeout
    while buf.waiting() != (puts, reads):
        assert time.monotonic() < deadline, f"waiting {buf.waiting()}, expected {(puts, reads)}"
        time.sleep(0.001)  # polls the condition; not a guess at how long blocking takes


# ---------------------------------------------------------------------- watermark / blocking
@pytest.mark.parametrize("kind", KINDS)
def test_watermark_holds_reads_continuously(kind):
    buf = make_buffer(BufferConfig(kind, capacity=10, watermark=5))
    fill(buf, 0, 4)
    with pytest.raises(TimeoutError, match="no data yet"):
        buf.get_batch(1, timeout=SHORT)
    fill(buf, 4, 5)
    assert len(buf.get_batch(2, timeout=1)) == 2
    if kind != "reservoir":  # FIFO/FIRO: now 3 held < watermark again
        assert len(buf) == 3
        with pytest.raises(TimeoutError):
            buf.get_batch(1, timeout=0)


@pytest.mark.parametrize("kind", KINDS)
def test_read_waits_for_n_samples(kind):
    buf = make_buffer(BufferConfig(kind, capacity=10))
    fill(buf, 0, 2)
    with pytest.raises(TimeoutError):
        buf.get_batch(3, timeout=0)
    fill(buf, 2, 3)
    assert len(buf.get_batch(3, timeout=0)) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_batch_size_validation(kind):
    buf = make_buffer(BufferConfig(kind, capacity=4))
    for bad in (0, -1, 5):
        with pytest.raises(ValueError, match="batch size"):
            buf.get_batch(bad)


def test_fifo_order_and_close_drain():
    buf = FIFOBuffer(10, watermark=4)
    fill(buf, 0, 5)
    assert ids(buf.get_batch(2)) == [0, 1]
    buf.close()
    buf.close()  # idempotent
    assert buf.closed
    # watermark no longer holds back; fewer at the very end; then [] forever
    assert ids(buf.get_batch(2)) == [2, 3]
    assert ids(buf.get_batch(2)) == [4]
    assert buf.get_batch(2) == []
    assert buf.get_batch(2, timeout=0) == []


@pytest.mark.parametrize("kind", ["fifo", "firo"])
def test_close_drains_every_sample_once(kind):
    buf = make_buffer(BufferConfig(kind, capacity=20, watermark=20))
    fill(buf, 0, 13)
    buf.close()
    assert sorted(drain(buf, 4)) == list(range(13))
    assert buf.get_batch(1) == []


@pytest.mark.parametrize("kind", KINDS)
def test_put_after_close_raises(kind):
    buf = make_buffer(BufferConfig(kind, capacity=3))
    buf.close()
    with pytest.raises(BufferClosedError):
        buf.put(smp(0))
    assert issubclass(BufferClosedError, RuntimeError)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", KINDS)
def test_close_wakes_blocked_reader(kind):
    buf = make_buffer(BufferConfig(kind, capacity=3))
    t, box = start(buf.get_batch, 2)
    wait_blocked(buf, reads=1)
    buf.close()
    t.join(5)
    assert box == {"result": []}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", KINDS)
def test_close_wakes_blocked_writer(kind):
    buf = make_buffer(BufferConfig(kind, capacity=2))
    fill(buf, 0, 2)
    t, box = start(buf.put, smp(2))
    wait_blocked(buf, puts=1)
    buf.close()
    t.join(5)
    assert isinstance(box.get("error"), BufferClosedError)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "firo"])
def test_back_pressure_blocks_then_unblocks(kind):
    buf = make_buffer(BufferConfig(kind, capacity=2))
    fill(buf, 0, 2)
    with pytest.raises(TimeoutError, match="full"):
        buf.put(smp(2), timeout=SHORT)
    t, box = start(buf.put, smp(2))
    wait_blocked(buf, puts=1)
    assert len(buf.get_batch(1)) == 1
    t.join(5)
    assert box == {"result": None}
    assert len(buf) == 2


@pytest.mark.timeout(10)
def test_blocked_reader_wakes_on_put():
    buf = FIFOBuffer(10, watermark=3)
    t, box = start(buf.get_batch, 2)
    fill(buf, 0, 2)
    wait_blocked(buf, reads=1)  # 2 held, watermark 3
    fill(buf, 2, 3)
    t.join(5)
    assert ids(box["result"]) == [0, 1]


# ---------------------------------------------------------------------- FIRO
def test_firo_random_order_is_seeded_and_exactly_once():
    orders = []
    for _ in range(2):
        buf = FIROBuffer(100, seed=7)
        fill(buf, 0, 50)
        buf.close()
        orders.append(drain(buf, 7))
    assert orders[0] == orders[1]
    assert sorted(orders[0]) == list(range(50))
    assert orders[0] != list(range(50))
    buf = FIROBuffer(100, seed=8)
    fill(buf, 0, 50)
    buf.close()
    assert drain(buf, 7) != orders[0]


# ---------------------------------------------------------------------- reservoir
def test_reservoir_blocks_only_while_nothing_drawn():
    buf = ReservoirBuffer(3, seed=0)
    fill(buf, 0, 3)
    with pytest.raises(TimeoutError, match="full"):
        buf.put(smp(3), timeout=SHORT)
    drawn = set(ids(buf.get_batch(1)))
    buf.put(smp(3), timeout=0)  # evicts the drawn sample
    st = buf.stats()
    assert (st.size, st.evicted, st.reuse_histogram) == (3, 1, {1: 1})
    buf.close()
    left = drain(buf)
    assert sorted(left) == sorted({0, 1, 2, 3} - drawn)


def test_reservoir_draws_with_replacement_and_never_evicts_unseen():
    buf = ReservoirBuffer(8, seed=3)
    seen: set[int] = set()
    counts: dict[int, int] = {}
    for i in range(200):
        try:
            buf.put(smp(i), timeout=0)
        except TimeoutError:
            batch = ids(buf.get_batch(4, timeout=0))
            seen.update(batch)
            for j in batch:
                counts[j] = counts.get(j, 0) + 1
            buf.put(smp(i), timeout=0)
    assert max(counts.values()) > 1  # re-draws happen
    buf.close()
    tail = drain(buf, 3)
    assert not set(tail) & seen
    assert seen | set(tail) == set(range(200))  # every sample served at least once


def test_reservoir_max_sample_reuse():
    buf = ReservoirBuffer(4, seed=1, max_sample_reuse=2)
    fill(buf, 0, 4)
    served: list[int] = []
    for _ in range(4):
        served += ids(buf.get_batch(2, timeout=0))
    assert sorted(served) == [0, 0, 1, 1, 2, 2, 3, 3]
    st = buf.stats()
    assert (st.size, st.evicted, st.reuse_histogram) == (0, 4, {2: 4})
    with pytest.raises(TimeoutError):
        buf.get_batch(1, timeout=0)
    # max_sample_reuse=1: a batch never holds the same sample twice
    buf = ReservoirBuffer(4, seed=1, max_sample_reuse=1)
    fill(buf, 0, 4)
    assert sorted(ids(buf.get_batch(4))) == [0, 1, 2, 3]
    assert len(buf) == 0


def test_reservoir_after_close_serves_unseen_once_then_empty():
    buf = ReservoirBuffer(10, seed=5)
    fill(buf, 0, 10)
    drawn = set(ids(buf.get_batch(6)))
    buf.close()
    tail = drain(buf, 4)
    assert sorted(tail) == sorted(set(range(10)) - drawn)
    assert buf.get_batch(4) == []
    assert len(buf) == 10  # drawn samples stay (for rewind)


def test_max_sample_reuse_validation():
    with pytest.raises(ValueError, match="max_sample_reuse"):
        ReservoirBuffer(4, max_sample_reuse=0)


# ---------------------------------------------------------------------- rewind
def test_fifo_rewind_requeues_in_original_order():
    buf = FIFOBuffer(3, retain=True)
    fill(buf, 0, 3)
    assert ids(buf.get_batch(2)) == [0, 1]
    assert buf.rewind() == 2
    assert ids(buf.get_batch(3)) == [2, 0, 1]
    assert buf.rewind() == 3
    buf.close()
    assert drain(buf, 2) == [2, 0, 1]
    assert buf.rewind() == 3  # works when closed
    assert drain(buf, 3) == [2, 0, 1]


def test_fifo_rewind_may_overfill_then_put_blocks():
    buf = FIFOBuffer(2, retain=True)
    fill(buf, 0, 2)
    buf.get_batch(2)
    fill(buf, 2, 4)
    assert buf.rewind() == 2
    assert len(buf) == 4
    with pytest.raises(TimeoutError):
        buf.put(smp(9), timeout=SHORT)
    assert ids(buf.get_batch(2)) == [2, 3]
    with pytest.raises(TimeoutError):
        buf.put(smp(9), timeout=0)  # len == capacity: still full
    buf.get_batch(1)
    buf.put(smp(9), timeout=0)


def test_firo_rewind():
    buf = FIROBuffer(5, retain=True, seed=2)
    fill(buf, 0, 5)
    buf.close()
    first = drain(buf, 2)
    assert buf.rewind() == 5
    second = drain(buf, 2)
    assert sorted(first) == sorted(second) == list(range(5))


@pytest.mark.parametrize("kind", ["fifo", "firo"])
def test_rewind_needs_retain(kind):
    buf = make_buffer(BufferConfig(kind, capacity=3))
    with pytest.raises(RuntimeError, match="retain=True"):
        buf.rewind()


def test_reservoir_rewind_resets_draw_counts():
    buf = ReservoirBuffer(6, seed=4)
    fill(buf, 0, 6)
    buf.get_batch(5)
    buf.close()
    drain(buf)
    assert buf.get_batch(1) == []
    assert buf.rewind() == 6
    assert sorted(drain(buf, 4)) == list(range(6))
    # not closed: rewound samples count as never drawn, so put blocks again
    buf = ReservoirBuffer(3, seed=4)
    fill(buf, 0, 3)
    buf.get_batch(3)
    assert buf.rewind() == 3
    with pytest.raises(TimeoutError):
        buf.put(smp(3), timeout=0)


# ---------------------------------------------------------------------- rate limiter
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
    for bad in [(0, 1, 0), (-1, 1, 0), (1, -0.5, 0), (1, 1, -1), (float("nan"), 1, 0)]:
        with pytest.raises(ValueError):
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


# ---------------------------------------------------------------------- stats
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


# ---------------------------------------------------------------------- checkpoints
def _exercise(buf: Buffer, start_id: int) -> list[int]:
    """Same calls on two buffers must give the same outputs."""
    out: list[int] = []
    for i in range(start_id, start_id + 12):
        try:
            buf.put(smp(i), timeout=0)
        except TimeoutError:
            out.append(-1)
        if i % 3 == 0:
            out += ids(buf.get_batch(2, timeout=0))
    buf.close()
    out += drain(buf, 3)
    return out


def _build(kind: str, **kw) -> Buffer:
    if kind == "reservoir":
        return ReservoirBuffer(6, seed=11, max_sample_reuse=3, **kw)
    return make_buffer(BufferConfig(kind, 6, seed=11, retain=True))


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip_gives_identical_future(kind, tmp_path):
    buf = _build(kind)
    for i in range(6):
        buf.put(smp(i))
    buf.get_batch(3)
    buf.put(smp(100))
    arrays, meta = buf.state_dict()
    json.dumps(meta)  # JSON-serializable
    assert all(isinstance(a, np.ndarray) for a in arrays.values())
    assert all(k[0] in "sr" and "/" in k for k in arrays)

    clone = _build(kind)
    clone.load_state_dict(arrays, json.loads(json.dumps(meta)))
    assert clone.stats() == buf.stats()
    buf.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "buffer.safetensors").is_file()
    assert (tmp_path / "ckpt" / "buffer.json").is_file()
    loaded = _build(kind)
    loaded.load(tmp_path / "ckpt")

    expected = _exercise(buf, 200)
    assert _exercise(clone, 200) == expected
    assert _exercise(loaded, 200) == expected
    if kind != "reservoir":
        assert loaded.rewind() == buf.rewind()
        assert drain(loaded, 2) == drain(buf, 2)


def test_state_dict_keeps_dtypes_shapes_order_and_closed_flag(tmp_path):
    buf = FIFOBuffer(4)
    sample: dict[str, np.ndarray] = {
        "scalar": np.array(1.5, dtype=np.float64),
        "grid": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],  # non-contiguous
        "flag": np.array([True, False]),
        "be": np.arange(3, dtype=">i4"),
        "a/b": np.zeros((0, 2), dtype=np.uint8),
    }
    buf.put(sample)
    buf.put({})
    buf.close()
    buf.save(tmp_path)
    other = FIFOBuffer(4)
    other.load(tmp_path)
    assert other.closed and len(other) == 2
    got, empty = other.get_batch(2)
    assert empty == {}
    assert list(got) == list(sample)  # the fields in their order (safetensors sorts them)
    for name, value in sample.items():
        assert got[name].shape == value.shape
        np.testing.assert_array_equal(got[name], value)


@pytest.mark.parametrize(
    "value",
    [[1, 2, 3], np.array([np.zeros(2), np.zeros(3)], dtype=object), np.array(["a"]), 3.0],
)
def test_state_dict_rejects_non_arrays_naming_the_field(value):
    buf = FIFOBuffer(3)
    buf.put({"ok": np.zeros(2), "bad_field": value})
    with pytest.raises(TypeError, match="bad_field"):
        buf.state_dict()


def test_load_state_dict_validation():
    arrays, meta = FIFOBuffer(4).state_dict()
    with pytest.raises(ValueError, match="'fifo'"):
        FIROBuffer(4).load_state_dict(arrays, meta)
    with pytest.raises(ValueError, match="capacity"):
        FIFOBuffer(5).load_state_dict(arrays, meta)
    with pytest.raises(ValueError, match="rate limiter"):
        FIFOBuffer(4, rate_limiter=RateLimiter(1, 2, 0)).load_state_dict(arrays, meta)
    r_arrays, r_meta = ReservoirBuffer(4, max_sample_reuse=2).state_dict()
    with pytest.raises(ValueError, match="max_sample_reuse"):
        ReservoirBuffer(4).load_state_dict(r_arrays, r_meta)
    bad = json.loads(json.dumps(meta))
    bad["contents"]["insert_ids"] = ["x"]
    with pytest.raises(ValueError, match="malformed"):
        FIFOBuffer(4).load_state_dict(arrays, bad)


def test_rate_limiter_state_round_trip():
    buf = ReservoirBuffer(10, rate_limiter=RateLimiter(1.0, 3.0, 1))
    fill(buf, 0, 3)
    buf.get_batch(2)
    arrays, meta = buf.state_dict()
    clone = ReservoirBuffer(10, rate_limiter=RateLimiter(1.0, 3.0, 1))
    clone.load_state_dict(arrays, meta)
    assert clone.rate_limiter is not None
    assert (clone.rate_limiter.inserts, clone.rate_limiter.samples) == (3, 2)


@pytest.mark.timeout(10)
def test_state_dict_is_safe_while_threads_run():
    buf = ReservoirBuffer(50, seed=0)
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                buf.put(smp(i), timeout=0.01)
                i += 1

    def consume() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                buf.get_batch(5, timeout=0.01)

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    try:
        for _ in range(30):
            arrays, meta = buf.state_dict()
            clone = ReservoirBuffer(50)
            clone.load_state_dict(arrays, meta)  # consistency is validated on load
            assert len(clone) == len(meta["contents"]["undrawn"]) + len(meta["contents"]["drawn"])
    finally:
        stop.set()
        for t in threads:
            t.join(5)


# ---------------------------------------------------------------------- make_buffer
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


@pytest.mark.timeout(10)
def test_reservoir_blocked_put_unblocks_after_a_draw():
    buf = ReservoirBuffer(2, seed=0)
    fill(buf, 0, 2)
    t, box = start(buf.put, smp(2))
    wait_blocked(buf, puts=1)
    drawn = ids(buf.get_batch(1))
    t.join(5)
    assert box == {"result": None}
    buf.close()
    assert sorted(drain(buf)) == sorted({0, 1, 2} - set(drawn))


@pytest.mark.timeout(10)
def test_load_state_dict_wakes_waiting_reader():
    src = FIFOBuffer(4)
    fill(src, 0, 3)
    dst = FIFOBuffer(4)
    t, box = start(dst.get_batch, 2)
    wait_blocked(dst, reads=1)
    dst.load_state_dict(*src.state_dict())
    t.join(5)
    assert ids(box["result"]) == [0, 1]


@pytest.mark.parametrize("kind", ["fifo", "firo", "reservoir"])
def test_put_available_inserts_what_fits_without_waiting(kind: str) -> None:
    buf = make_buffer(BufferConfig(kind, 4))
    samples = [{"x": np.array(i)} for i in range(6)]
    n = buf.put_available(samples)  # full of samples never drawn: no room, as for put()
    assert n == 4 and buf.stats().put == 4
    assert sorted(int(s["x"]) for s in buf.get_batch(4)) == [0, 1, 2, 3]
    assert buf.put_available(samples[n:]) == 2  # room again (a reservoir replaces)
    buf.close()
    with pytest.raises(BufferClosedError):
        buf.put_available(samples)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 8),
    max_reuse=st.one_of(st.none(), st.integers(1, 3)),
    ops=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=12),
)
def test_reservoir_burst_puts_are_one_put_per_sample(
    capacity: int, max_reuse: int | None, ops: list[tuple[int, int]]
) -> None:
    """A burst through `put_available` takes the same random numbers, victims, counters
    and contents as `put` sample by sample (the burst path inlines the evictions)."""
    burst = ReservoirBuffer(capacity, seed=3, max_sample_reuse=max_reuse)
    single = ReservoirBuffer(capacity, seed=3, max_sample_reuse=max_reuse)
    next_id = 0
    for n_put, n_get in ops:
        samples = [smp(i) for i in range(next_id, next_id + n_put)]
        n = burst.put_available(samples)
        k = 0
        for sample in samples:
            try:
                single.put(sample, timeout=0)
            except TimeoutError:
                break
            k += 1
        assert n == k
        next_id += n
        n_get = min(n_get, len(burst))
        if n_get:
            assert ids(burst.get_batch(n_get, timeout=0)) == ids(single.get_batch(n_get, timeout=0))
    (a_arrays, a_meta), (b_arrays, b_meta) = burst.state_dict(), single.state_dict()
    assert a_meta == b_meta
    assert a_arrays.keys() == b_arrays.keys()
    assert all(np.array_equal(a_arrays[key], b_arrays[key]) for key in a_arrays)


@pytest.mark.timeout(10)
def test_waiting_counts_blocked_calls_only():
    """`Buffer.waiting` (what `wait_blocked` relies on): 0 before a call blocks, 1 while
    it is blocked, 0 again once it has returned."""
    buf = FIFOBuffer(1)
    assert buf.waiting() == (0, 0)
    buf.put(smp(0))  # room: returns at once, never counted
    assert buf.waiting() == (0, 0)
    t, box = start(buf.put, smp(1))
    wait_blocked(buf, puts=1)
    assert t.is_alive() and box == {}
    assert len(buf.get_batch(1)) == 1
    t.join(5)
    assert box == {"result": None} and buf.waiting() == (0, 0)
    buf.get_batch(1)
    r, rbox = start(buf.get_batch, 1)
    wait_blocked(buf, reads=1)
    assert r.is_alive() and rbox == {}
    buf.close()
    r.join(5)
    assert rbox == {"result": []} and buf.waiting() == (0, 0)
