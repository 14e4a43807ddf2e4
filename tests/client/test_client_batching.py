"""Fast small sends are batched (a BATCH message) and arrive once, a batch left by a pause
is sent by the flusher, sends further apart than the delay are not batched, and a send
after a pause leaves after the batched steps before it; `StepSet` counts distinct steps.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from client_runs import GOOD, Receiver
from hypothesis import given, settings
from hypothesis import strategies as st

from melissa_trainer import wire as p
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.step_set import StepSet

pytestmark = pytest.mark.usefixtures("_clean_environment")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60) | st.sampled_from([0, 3, 6, 9, 12]), max_size=200))
def test_step_set_counts_distinct_steps(steps: list[int]) -> None:
    counter = StepSet()
    seen: set[int] = set()
    for step in steps:
        counter.add(step)
        seen.add(step)
        assert counter.count == len(seen)
        assert counter.span() == (min(seen), max(seen))  # (what a close compares)
    assert all((t in counter) == (t in seen) for t in range(-1, 70))
    assert steps or counter.span() is None


def test_step_set_is_small_for_regular_steps() -> None:
    counter = StepSet()
    for step in range(0, 1_000_000, 10):
        counter.add(step)
    assert counter.count == 100_000 and counter.runs == [[0, 999_990, 10]]


@pytest.mark.timeout(30)
def test_fast_small_sends_are_batched_and_arrive_once(receiver: Receiver) -> None:
    n = 2000
    with Client(
        {"u": ((64,), "f4"), "w": ((3,), "i8")},
        simulation_id=9,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_bytes=4096),
    ) as c:
        for t in range(n):
            c.send(t, u=np.full(64, t, np.float32), w=np.array([t, -t, 7], np.int64))
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert sorted((m.time_step, m.name) for m in data) == [
        (t, name) for t in range(n) for name in ("u", "w")
    ]
    for m in data:
        want = [m.time_step] * 64 if m.name == "u" else [m.time_step, -m.time_step, 7]
        assert m.payload.tolist() == want
    assert messages[-1] == p.Bye(9, 0, 1, n)
    assert receiver.batches >= n * (64 * 4 + 8) // 4096  # what fills batches of 4 KB
    assert len(receiver.frames) < n // 10  # far fewer messages than payloads


@pytest.mark.timeout(30)
def test_a_batch_left_by_a_pause_is_sent_by_the_flusher(receiver: Receiver) -> None:
    with Client(
        GOOD,
        simulation_id=2,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_delay=0.05),
    ) as c:
        for t in range(3):  # the first goes at once, the next two wait in a batch
            c.send(t, u=np.full((2, 3), t, np.float32))
        got = [receiver.recv(timeout=10) for _ in range(4)]  # no send, no close: the flusher
        assert [type(m) for m in got] == [p.Hello, p.Data, p.Data, p.Data]
        assert [m.time_step for m in got[1:]] == [0, 1, 2]  # type: ignore[union-attr]
        assert receiver.batches == 1
    assert receiver.recv() == p.Bye(2, 0, 1, 3)


@pytest.mark.timeout(30)
def test_sends_further_apart_than_the_delay_are_not_batched(receiver: Receiver) -> None:
    with Client(
        GOOD,
        simulation_id=2,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_delay=0.01),
    ) as c:
        for t in range(4):
            c.send(t, u=np.zeros((2, 3), np.float32))
            time.sleep(0.03)
    assert len(receiver.until_bye()) == 6 and receiver.batches == 0


class _Clock:
    """`time` for the client's modules, whose `monotonic` the test moves forward: a
    pause of the simulation without a sleep (the flusher, on the real clock, sleeps
    `batch_delay / 2` of real time between its rounds)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


@pytest.mark.timeout(30)
@pytest.mark.parametrize("send_timeout", [None, 10.0])  # the fast path, the general one
def test_a_send_after_a_pause_leaves_after_the_batched_steps_before_it(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, send_timeout: float | None
) -> None:
    """A send after a pause longer than `batch_delay` goes at once, as plain DATA; the
    records of earlier steps still in a batch (the flusher had not sent them: a busy
    machine) leave before it, so that the receiver gets one client's steps in the order
    sent (the batch used to leave after it: a FIFO buffer got steps 0, 20, 10, 30)."""
    from melissa_trainer.client import fast_send, transport

    clock = _Clock()
    monkeypatch.setattr(transport, "time", clock)
    monkeypatch.setattr(fast_send, "time", clock)  # (read when the client is made)
    with Client(
        GOOD,
        simulation_id=4,
        endpoints=receiver.endpoint,
        send_timeout=send_timeout,
        tuning=ClientTuning(close_timeout=10, batch_delay=3600),  # the flusher sleeps
    ) as c:
        c.send(0, u=np.full((2, 3), 0, np.float32))  # the first: at once
        c.send(1, u=np.full((2, 3), 1, np.float32))  # soon after: into a batch
        clock.offset += 7200  # a pause: the next send is "rare"
        c.send(2, u=np.full((2, 3), 2, np.float32))
    got = receiver.until_bye()
    assert [type(m) for m in got] == [p.Hello, p.Data, p.Data, p.Data, p.Bye]
    assert [m.time_step for m in got[1:4]] == [0, 1, 2]  # type: ignore[union-attr]
    assert [m.payload.tolist() for m in got[1:4]] == [  # type: ignore[union-attr]
        [t] * 6 for t in range(3)
    ]
    assert receiver.batches == 1 and got[-1] == p.Bye(4, 0, 1, 3)
