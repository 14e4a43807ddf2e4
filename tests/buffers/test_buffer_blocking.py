"""Buffers' watermark, blocking and close: reads wait for the watermark and for their
samples, FIFO's order, close drains every sample once and wakes blocked readers and
writers, back pressure, `put_available` inserts what fits without waiting, and
`Buffer.waiting` counts the blocked calls only."""

from __future__ import annotations

import numpy as np
import pytest
from buffer_samples import KINDS, SHORT, drain, fill, ids, smp, start, wait_blocked

from melissa_trainer.buffers import (
    BufferClosedError,
    BufferConfig,
    FIFOBuffer,
    ReservoirBuffer,
    make_buffer,
)


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
        with pytest.raises(TimeoutError, match=r"no data yet \(3 samples held, 5 needed\)"):
            buf.get_batch(1, timeout=0)


@pytest.mark.parametrize("kind", KINDS)
def test_read_waits_for_n_samples(kind):
    buf = make_buffer(BufferConfig(kind, capacity=10))
    fill(buf, 0, 2)
    with pytest.raises(TimeoutError, match=r"no data yet \(2 samples held, 3 needed\)"):
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
    with pytest.raises(BufferClosedError, match="on a closed buffer"):
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


@pytest.mark.parametrize("kind", ["fifo", "firo", "reservoir"])
def test_put_available_inserts_what_fits_without_waiting(kind: str) -> None:
    buf = make_buffer(BufferConfig(kind, 4))
    samples = [{"x": np.array(i)} for i in range(6)]
    n = buf.put_available(samples)  # full of samples never drawn: no room, as for put()
    assert n == 4 and buf.stats().put == 4
    assert sorted(int(s["x"]) for s in buf.get_batch(4)) == [0, 1, 2, 3]
    assert buf.put_available(samples[n:]) == 2  # room again (a reservoir replaces)
    buf.close()
    with pytest.raises(BufferClosedError, match="on a closed buffer"):
        buf.put_available(samples)


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
