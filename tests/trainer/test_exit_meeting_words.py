"""The meeting's warnings say its own cause and bound (the review's hrev6, item 3: they
gave the stop agreement's cause, "a rank still waiting for its data", and "ends with an
error only at the process group's timeout (30 min)" for a meeting bounded at 120 s), and
a watched wait that raised is not said to have "arrived"."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch.distributed as dist

from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.trainer import exit_meeting
from melissa_trainer.trainer.exit_meeting import MEET_USUAL, meet

WAIT = 30.0  # seconds an event is waited for before the test fails (never reached)


class Said(logging.Handler):
    """The warnings of the watch and the meeting, and an event set at each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.warned = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.warned.set()


@pytest.fixture
def said() -> Iterator[Said]:
    handler = Said()
    logs = [logging.getLogger("melissa_trainer.core.wait_watch"), exit_meeting.logger]
    for log in logs:
        log.addHandler(handler)
    try:
        yield handler
    finally:
        for log in logs:
            log.removeHandler(handler)


@pytest.mark.timeout(60)
def test_a_wait_that_raised_did_not_arrive(said: Said) -> None:
    watch = WaitWatch(rank=0, first=0.001)
    with (
        pytest.raises(RuntimeError, match="a peer is gone"),
        watch.waiting("the other ranks at a save"),
    ):
        assert said.warned.wait(WAIT)
        raise RuntimeError("a peer is gone")
    assert said.messages[-1].startswith("rank 0: the other ranks at a save ended with an error")
    assert not any("arrived" in m for m in said.messages), said.messages


@pytest.mark.timeout(60)
def test_the_meeting_says_its_own_cause_and_bound(
    said: Said, monkeypatch: pytest.MonkeyPatch
) -> None:
    def barrier(timeout: Any) -> None:  # a late peer: the barrier times out
        assert said.warned.wait(WAIT)
        raise RuntimeError("Rank 1 failed to pass monitoredBarrier in 4 ms")

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    monkeypatch.setattr(dist, "monitored_barrier", barrier)
    assert meet(0, "a source's failure", timeout=0.004) is False
    first = said.messages[0]
    assert MEET_USUAL in first and "The meeting ends at 0.004 s" in first, first
    assert "waiting for its data" not in first and "30 min" not in first, first
    assert not any("arrived" in m for m in said.messages), said.messages
    assert "ended with an error" in said.messages[-2], said.messages
    assert said.messages[-1].startswith("rank 0 did not meet every other rank"), said.messages
