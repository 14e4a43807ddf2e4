"""The receiver's puts (`stream.feeder.Feeder`): order, back-pressure, a closed buffer."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from melissa_trainer.buffers import FIFOBuffer, Sample
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
