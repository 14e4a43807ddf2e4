"""Buffers in checkpoints: `state_dict` and `load_state_dict` give an identical future
(dtypes, shapes, order, the closed flag, the rate limiter kept), refuse what they cannot
hold naming the field, are safe while threads run, and a load wakes a waiting reader."""

from __future__ import annotations

import contextlib
import json
import threading

import numpy as np
import pytest
from buffer_samples import KINDS, drain, fill, ids, smp, start, wait_blocked

from melissa_trainer.buffers import (
    Buffer,
    BufferConfig,
    FIFOBuffer,
    FIROBuffer,
    RateLimiter,
    ReservoirBuffer,
    make_buffer,
)


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
