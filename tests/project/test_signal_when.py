"""`signal_when` (tests/signal_when.py): a check that passes signals this process; one
that fails interrupts the block at once and fails it with the check's message (the
preemption tests' thread checks failed only by the test's timeout before it)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest
from signal_when import signal_when


class Signalled(Exception):
    """Raised by the test's SIGUSR1 handler."""


def _until_a_signal() -> None:
    """Wait until a signal's handler raises. (Not `signal.pause()`: a signal caught just
    before it is lost to it, and it waits for ever; not `Event.wait()`: an exception
    raised inside it can break its lock. A sleep returns at a signal, its handler runs
    between two: none is lost; the period bounds the latency only.)"""
    while True:
        time.sleep(0.05)


@pytest.fixture
def usr1() -> Iterator[None]:
    def raise_signalled(signum: int, frame: FrameType | None) -> None:
        raise Signalled(signum)

    before = signal.signal(signal.SIGUSR1, raise_signalled)
    yield
    signal.signal(signal.SIGUSR1, before)


@pytest.mark.timeout(30)
def test_a_passing_check_sends_the_signal(usr1: None) -> None:
    checked = threading.Event()
    with pytest.raises(Signalled), signal_when(checked.set, signal.SIGUSR1):
        _until_a_signal()
    assert checked.is_set()


@pytest.mark.timeout(30)
def test_a_failing_check_interrupts_the_block_with_its_message(usr1: None) -> None:
    blocked = threading.Event()

    def check() -> None:
        blocked.wait()  # (the block waits already, or is about to: the signal wakes it)
        raise AssertionError("the check's own words")

    failed = pytest.raises(AssertionError, match="the check's own words")
    with failed as info, signal_when(check, signal.SIGUSR1):
        blocked.set()
        _until_a_signal()  # (as a trainer waiting for the signal does)
    assert isinstance(info.value.__cause__, KeyboardInterrupt)  # interrupted, not signalled


@pytest.mark.timeout(30)
def test_a_block_that_ended_first_is_not_signalled_afterwards(usr1: None) -> None:
    go, done = threading.Event(), threading.Event()

    def late_check() -> None:
        go.wait()
        done.set()

    failed = pytest.raises(RuntimeError, match="the block's own error")
    with failed, signal_when(late_check, signal.SIGUSR1):
        raise RuntimeError("the block's own error")
    go.set()
    assert done.wait(20)
    # a signal sent now would raise Signalled at the next bytecode: none comes
    threading.Event().wait(0)
