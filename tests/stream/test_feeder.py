"""The receiver's puts (`stream.feeder.Feeder`): order, back-pressure, a closed buffer."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from melissa_trainer.buffers import Buffer, FIFOBuffer, ReservoirBuffer, Sample, SampleBlock
from melissa_trainer.stream.feeder import Feeder


def sample(i: int) -> Sample:
    return {"x": np.array(i)}


def steps(samples: list[Sample]) -> list[int]:
    return [int(s["x"]) for s in samples]


class Calls:
    def __init__(self) -> None:
        self.requests = self.closed = 0

    def serve(self) -> None:
        self.requests += 1

    def close(self) -> bool:
        self.closed += 1
        return False


def test_a_pump_never_blocks_and_what_did_not_fit_goes_first() -> None:
    buf, calls = FIFOBuffer(3), Calls()
    feeder = Feeder(buf, 0.01, calls.serve, calls.close)
    feeder.pumping = True
    assert feeder.put_many([sample(i) for i in range(5)]) == 5  # 3 in, 2 kept
    assert feeder.put(sample(5)) is True  # behind the kept ones, though room may come
    assert len(buf) == 3 and len(feeder.overflow) == 3
    assert steps(buf.get_batch(3)) == [0, 1, 2]
    assert feeder.flush(block=False) is True
    assert steps(buf.get_batch(3)) == [3, 4, 5]
    assert calls.requests == 0  # never waited


@pytest.mark.timeout(30)
def test_the_thread_blocks_for_room_and_serves_requests_meanwhile() -> None:
    buf, calls = FIFOBuffer(2), Calls()
    feeder = Feeder(buf, 0.01, calls.serve, calls.close)
    reader = threading.Timer(0.3, lambda: buf.get_batch(2))
    reader.start()
    assert feeder.put_many([sample(i) for i in range(4)]) == 4  # waited for the reader
    reader.join()
    assert calls.requests > 0 and steps(buf.get_batch(2)) == [2, 3]


def test_a_request_that_raises_abandons_a_blocked_put() -> None:
    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    buf = FIFOBuffer(1)
    feeder = Feeder(buf, 0.01, stop, lambda: False)
    feeder.put(sample(0))
    with pytest.raises(Stop):
        feeder.put(sample(1))
    assert len(buf) == 1


def test_a_closed_buffer_ends_the_puts() -> None:
    buf, calls = FIFOBuffer(2), Calls()
    feeder = Feeder(buf, 0.01, calls.serve, calls.close)
    feeder.pumping = True
    feeder.put_many([sample(i) for i in range(3)])  # one kept back
    buf.close()
    assert feeder.flush(block=False) is False and not feeder.overflow
    assert feeder.put(sample(3)) is False and feeder.put_many([sample(4)]) == 0
    assert calls.closed == 3


def block(first: int, n: int) -> SampleBlock:
    """`n` samples whose ``x`` is first, first + 1, ... (and a 1 KB row each)."""
    xs = np.arange(first, first + n)
    return SampleBlock({"x": xs, "row": np.repeat(xs[:, None], 256, axis=1).astype(np.float32)})


def read_all(buf: Buffer, draws: int) -> list[int]:
    return [int(s["x"]) for s in buf.get_batch(draws, timeout=0)]


@pytest.mark.parametrize("kind", ["fifo", "reservoir"])
def test_a_pump_keeps_the_rest_of_a_block_whole_and_feeds_what_per_sample_puts_feed(
    kind: str,
) -> None:
    """A block that does not fit waits as one item (no dict per sample), and the buffer
    then holds and serves exactly what the same samples, put one list at a time, give
    (the plain path: the block's samples as dicts)."""

    def run(as_block: bool) -> list[list[int]]:
        buf: Buffer = FIFOBuffer(10) if kind == "fifo" else ReservoirBuffer(10, seed=3)
        feeder = Feeder(buf, 0.01, Calls().serve, Calls().close)
        feeder.pumping = True
        served, nxt = [], 0
        for _ in range(6):  # each round: a batch of 7 in, 5 out
            b = block(nxt, 7)
            nxt += 7
            feeder.flush(block=False)  # what is kept goes first
            assert feeder.put_many(b if as_block else list(b)) == 7
            if as_block:
                assert all(type(x) is SampleBlock for x in feeder.overflow)
                # the rest of a block, a block that waited whole for room, the new one
                assert len(feeder.overflow) <= 3
            served.append(read_all(buf, 5))
        while feeder.overflow:
            feeder.flush(block=False)
            served.append(read_all(buf, 5))
        served.append(read_all(buf, len(buf)))
        return served

    plain, blocks = run(False), run(True)
    assert blocks == plain
    if kind == "fifo":  # in order, each exactly once
        assert [x for s in blocks for x in s] == list(range(42))


def test_a_blocked_flush_takes_the_rest_of_a_block_sample_by_sample_in_order() -> None:
    buf, calls = FIFOBuffer(3), Calls()
    feeder = Feeder(buf, 0.01, calls.serve, calls.close)
    feeder.pumping = True
    assert feeder.put_many(block(0, 5)) == 5  # 3 in, a block of 2 kept
    assert len(feeder.overflow) == 1 and len(feeder.overflow[0]) == 2
    feeder.put(sample(5))  # behind it
    feeder.pumping = False
    reader = threading.Timer(0.2, lambda: buf.get_batch(3))
    reader.start()
    assert feeder.flush(block=True) is True  # waited for the reader
    reader.join()
    assert steps(buf.get_batch(3)) == [3, 4, 5] and not feeder.overflow


class CountingReservoir(ReservoirBuffer):
    """A reservoir that records its `put_available` calls: (samples given, put)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, int]] = []

    def put_available(self, samples):  # type: ignore[no-untyped-def]
        n = super().put_available(samples)
        self.calls.append((len(samples), n))
        return n


def test_a_pump_keeps_a_block_that_does_not_fit_whole_and_puts_it_in_one_call() -> None:
    """Under back-pressure (the reader draws 8, a BATCH brings 7), a block that does not
    fit whole waits whole for the next pump's flush, instead of a put of what fits and
    one of the rest (issue 42's pinned row); no sample is lost."""
    buf = CountingReservoir(16, seed=1)
    feeder = Feeder(buf, 0.01, Calls().serve, Calls().close)
    feeder.pumping = True
    assert feeder.put_many(block(0, 16)) == 16  # fills it: room for all, put at once
    assert buf.calls == [(16, 16)] and not feeder.overflow
    nxt, waited = 16, 0
    for _ in range(30):
        read_all(buf, 8)  # the reader's step: 8 draws (each drawn sample may be evicted)
        feeder.flush(block=False)  # the pump: what waits goes first ...
        b = block(nxt, 7)
        calls = len(buf.calls)
        assert feeder.put_many(b) == 7  # ... then one BATCH
        nxt += 7
        if len(buf.calls) == calls:  # not tried: it waits, whole (not the rest of a split)
            assert feeder.overflow[-1] is b
            waited += 1
        else:
            assert buf.calls[-1] == (7, 7)  # tried only when it fits whole
    assert waited > 0  # the case did arise
    # split only by a flush that found less room than the block holds (each pump then
    # makes one call where it made two: the rest, and the new BATCH split again)
    assert buf.stats().put + sum(len(b) for b in feeder.overflow) == nxt  # none lost


def test_room_says_what_put_available_would_take() -> None:
    buf = ReservoirBuffer(4, seed=0)
    assert buf.room() == 4
    buf.put_available([sample(i) for i in range(3)])
    assert buf.room() == 1
    buf.put(sample(3))
    assert buf.room() == 0  # full, nothing drawn
    buf.get_batch(3)  # each drawn sample may be evicted (the draws may repeat one)
    room = buf.room()
    assert room is not None and 1 <= room <= 3
    assert buf.put_available([sample(10 + i) for i in range(4)]) == room
    assert FIFOBuffer(4).room() is None  # a policy that does not say
    buf.close()
    assert buf.room() is None  # a put says it is closed
