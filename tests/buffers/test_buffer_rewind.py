"""Buffers' rewind (pseudo-epochs): FIFO requeues in the original order (and may
overfill), FIRO, the reservoir resets its draw counts; a buffer without `retain` refuses.
"""

from __future__ import annotations

import pytest
from buffer_samples import SHORT, drain, fill, ids, smp

from melissa_trainer.buffers import (
    BufferConfig,
    FIFOBuffer,
    FIROBuffer,
    ReservoirBuffer,
    make_buffer,
)


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
    with pytest.raises(TimeoutError, match="buffer full; 4/2 samples held"):
        buf.put(smp(9), timeout=SHORT)
    assert ids(buf.get_batch(2)) == [2, 3]
    with pytest.raises(TimeoutError, match="buffer full; 2/2 samples held"):
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
    with pytest.raises(TimeoutError, match="buffer full; 3/3 samples held"):
        buf.put(smp(3), timeout=0)
