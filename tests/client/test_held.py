"""HeldArrays: which large arrays a send waits for, in each `array_reuse` mode."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from melissa_trainer.client import held as held_module
from melissa_trainer.client.held import HeldArrays, Released
from melissa_trainer.client.sockets import SLICE


class FakeTracker:
    """A tracker that ZeroMQ releases when the test says so (`wait` records calls).

    A wait without a deadline waits in slices (`SLICE`, `send_wait`): a wait of a whole
    slice stands for one that ZeroMQ's release ends within it; a shorter one (a deadline
    that passed) raises `zmq.NotDone` as a real tracker's would."""

    def __init__(self, name: str, log: list[str], done: bool = False) -> None:
        self.name, self.log, self.done = name, log, done

    def wait(self, timeout: float = -1) -> None:
        self.log.append(self.name)
        if not self.done:
            if 0 <= timeout < SLICE:
                raise zmq.NotDone
            self.done = True  # (released within the slice)


def _send(held: HeldArrays, log: list[str], names: str, nbytes: int = 10) -> list[FakeTracker]:
    trackers = [FakeTracker(n, log) for n in names]
    for t in trackers:
        held.add(t, nbytes)  # type: ignore[arg-type]
    held.after_send(len(trackers), None)
    return trackers


def test_immediate_waits_for_the_send_s_own_arrays() -> None:
    log: list[str] = []
    held = HeldArrays("immediate")
    _send(held, log, "ab")
    assert log == ["a", "b"] and len(held) == 0 and held.nbytes == 0


def test_next_send_waits_for_the_previous_send_s_arrays_only() -> None:
    log: list[str] = []
    held = HeldArrays("next_send")
    _send(held, log, "ab")
    assert log == [] and len(held) == 2
    _send(held, log, "c")
    assert log == ["a", "b"] and len(held) == 1 and held.nbytes == 10
    held.release_all(None)
    assert log == ["a", "b", "c"] and len(held) == 0


def test_never_waits_for_the_oldest_beyond_the_bound_never_for_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(held_module, "HELD_BYTES_MAX", 25)
    log: list[str] = []
    held = HeldArrays("never")
    _send(held, log, "a")
    _send(held, log, "b")
    trackers = _send(held, log, "cd")  # earlier: 20 bytes <= 25
    assert log == [] and held.nbytes == 40
    _send(held, log, "e")  # earlier: 40 bytes; the oldest two bring it to 20
    assert log == ["a", "b"] and len(held) == 3
    trackers[0].done = True  # released by ZeroMQ meanwhile: dropped without a wait
    _send(held, log, "f" * 5)  # one send bigger than the bound: not waited for
    assert log == ["a", "b"] and held.nbytes == 70
    _send(held, log, "g")
    assert log == ["a", "b", "d", "e", "f", "f", "f"] and held.nbytes == 30  # 20 earlier


def test_a_wait_past_its_deadline_keeps_the_arrays_held() -> None:
    log: list[str] = []
    held = HeldArrays("immediate")
    t = FakeTracker("a", log)
    held.add(t, 10)  # type: ignore[arg-type]
    with pytest.raises(zmq.NotDone):
        held.after_send(1, deadline=0.0)
    assert len(held) == 1 and held.nbytes == 10
    t.done = True
    held.release_all(0.0)
    assert len(held) == 0 and held.nbytes == 0


def test_unknown_modes_are_refused() -> None:
    with pytest.raises(ValueError, match="array_reuse must be one of"):
        HeldArrays("sometimes")


@pytest.mark.timeout(30)
def test_released_tracks_a_zero_copy_frame_until_zeromq_frees_it() -> None:
    """`Released` (the client's tracker) is done exactly when pyzmq drops the object
    sent without a copy: not while the message is queued or held by the receiver, at
    once after the received frame is freed (in pyzmq's collector thread); `wait` past
    its timeout raises `zmq.NotDone`, as pyzmq's trackers do."""
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    try:
        pull.bind("inproc://released")
        push.connect("inproc://released")
        array = np.arange(1 << 16, dtype=np.float64)  # 512 KiB: above the copy threshold
        view = array.data
        tracker = Released(view)
        push.send(view, copy=False)
        del view  # the client keeps no reference after the send
        assert not tracker.done
        with pytest.raises(zmq.NotDone):
            tracker.wait(0.05)
        frame = pull.recv(copy=False)  # the receiver holds the very same memory
        assert not tracker.done
        assert np.array_equal(np.frombuffer(frame.buffer, np.float64), array)
        del frame
        tracker.wait(10.0)  # returns once the collector thread has dropped the view
        assert tracker.done
        tracker.wait(0.0)  # done stays done

        small = memoryview(b"x" * 100)  # under the copy threshold: copied, never held
        quick = Released(small)
        push.send(small, copy=False)
        del small
        assert quick.done
        pull.recv()
    finally:
        pull.close(linger=0)
        push.close(linger=0)
        ctx.term()
