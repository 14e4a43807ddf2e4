"""The examples' `StepTimer` (examples/study_report.py) counts the device's time in steps
on CUDA, read once per window, and the host's wall clock elsewhere. No GPU here: a
stand-in for `torch.cuda.Event` models one CUDA stream (events complete in the order
recorded, at the device time the test sets; `elapsed_time` on an event that has not
completed raises, as CUDA's cudaErrorNotReady does), and counts the waits and reads."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import study_report
import torch
from study_report import StepTimer

pytestmark = pytest.mark.timeout(60)


class Stream:
    """One CUDA stream as the stand-in sees it: the device's clock (ms), the events
    recorded in order, how many the host has waited for (completed), and the calls."""

    def __init__(self) -> None:
        self.device_ms = 0.0
        self.recorded: list[FakeEvent] = []
        self.completed = 0  # events [0, completed) have run
        self.syncs: list[int] = []  # the step after which each wait happened
        self.elapsed_calls = 0
        self.created = 0
        self.step = 0


STREAM = Stream()


class FakeEvent:
    """A stand-in for `torch.cuda.Event(enable_timing=True)` on `STREAM`."""

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing, "an event without timing has no elapsed_time"
        STREAM.created += 1
        self.index = -1
        self.at = 0.0

    def record(self, stream: Any = None) -> None:
        self.index = len(STREAM.recorded)
        self.at = STREAM.device_ms  # the time the device reaches it, set by the test
        STREAM.recorded.append(self)

    def synchronize(self) -> None:
        STREAM.syncs.append(STREAM.step)
        STREAM.completed = max(STREAM.completed, self.index + 1)

    def elapsed_time(self, end: FakeEvent) -> float:
        STREAM.elapsed_calls += 1
        if max(self.index, end.index) >= STREAM.completed:
            raise RuntimeError("CUDA error: device not ready")
        return end.at - self.at


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Stream:
    global STREAM
    STREAM = Stream()
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    return STREAM


def on(device: str) -> Any:
    return SimpleNamespace(accelerator=SimpleNamespace(device=torch.device(device)))


def run_steps(timer: StepTimer, trainer: Any, stream: Stream, durations: list[float]) -> None:
    """Each step: the device idles 1 ms before it (waiting for data), then runs the step
    for its duration; the host's own clock hardly moves (it only queues the work)."""
    for i, ms in enumerate(durations):
        stream.device_ms += 1.0
        timer.on_step_start(trainer, None, None)
        stream.device_ms += ms
        stream.step = i + 1  # (the step that is ending)
        timer.on_step_end(trainer, None, None)


def test_on_cuda_the_seconds_are_the_devices_not_the_hosts_issuing_them(
    stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host queues a step in 1 ms; the device runs it in 50 (the oracle)."""
    host = iter(float(i) / 1000 for i in range(100))
    monkeypatch.setattr(study_report.time, "perf_counter", lambda: next(host))
    timer = StepTimer()
    run_steps(timer, on("cuda"), stream, [50.0, 50.0, 50.0])
    assert timer.seconds == pytest.approx(0.150)


def test_on_cuda_it_counts_the_device_time_of_the_steps_read_once_a_window(
    stream: Stream,
) -> None:
    window, steps = 8, 30
    durations = [5.0 + (i % 3) for i in range(steps)]  # device ms per step
    timer = StepTimer(window=window)
    run_steps(timer, on("cuda"), stream, durations)
    # during the run: a wait when each window ends (from the second on, for the window
    # before it, whose events the device has run), never one per step
    assert stream.syncs == [16, 24]
    assert stream.elapsed_calls == 2 * window  # steps 1-8, then 9-16: each read once
    assert timer.seconds == pytest.approx(sum(durations) / 1000)  # the device's, idle excluded
    assert stream.syncs == [16, 24, 30, 30]  # then the last two windows, once each
    assert stream.elapsed_calls == steps and timer.reads == 4
    assert stream.created <= 2 * 2 * window  # events reused, not one made per step
    assert timer.seconds == pytest.approx(sum(durations) / 1000)  # read again: unchanged
    assert len(stream.syncs) == 4


def test_the_reads_never_touch_an_event_the_device_has_not_run(stream: Stream) -> None:
    """A window of 1: every step end reads the step before (already waited for)."""
    timer = StepTimer(window=1)
    run_steps(timer, on("cuda:0"), stream, [2.0, 3.0, 4.0])
    assert stream.syncs == [2, 3]  # at the end of steps 2 and 3, for steps 1 and 2
    assert timer.seconds == pytest.approx(0.009)


def test_off_cuda_it_is_the_hosts_wall_clock_and_makes_no_event(
    stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([10.0, 10.25, 11.0, 11.5])
    monkeypatch.setattr(study_report.time, "perf_counter", lambda: next(clock))
    timer = StepTimer()
    run_steps(timer, on("cpu"), stream, [5.0, 5.0])
    assert timer.seconds == pytest.approx(0.75)
    assert stream.created == 0 and stream.syncs == [] and timer.reads == 0


def test_a_window_under_one_step_is_refused() -> None:
    with pytest.raises(ValueError, match="window must be at least 1"):
        StepTimer(window=0)
