"""The tests' wait for "too slow" (tests/waiting.py, `UNTIL_TEST_TIMEOUT`): it lasts until
shortly before the running test's own timeout (tests/conftest.py tells it), and fails
then with its message, not by the timeout marker's stack dump."""

from __future__ import annotations

import time

import pytest
import waiting
from waiting import MIN_MARGIN, UNTIL_TEST_TIMEOUT, wait_until


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
@pytest.mark.timeout(8)
def test_a_wait_until_the_tests_timeout_fails_with_its_message_before_the_marker() -> None:
    # (one that waited past the test's 8 s would be ended by the marker: a failure too,
    # but not this one, which `raises` asks for)
    with pytest.raises(AssertionError, match="shortly before the test's timeout waiting for x"):
        wait_until(lambda: False, "x", UNTIL_TEST_TIMEOUT, interval=0.05)


@pytest.mark.timeout(60)
def test_the_deadline_is_the_markers_timeout_less_its_margin() -> None:
    deadline = waiting._deadline
    assert deadline is not None
    # set at the test's setup, moments ago: 60 s less 15 % (9 s) from then
    assert 60 - 9 - 30 < deadline - time.monotonic() <= 60 - 9


def test_without_a_test_timeout_the_wait_is_bounded_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiting, "_deadline", None)
    monkeypatch.setattr(waiting, "NO_TEST_TIMEOUT", 0.0)
    with pytest.raises(AssertionError, match="waiting for y"):
        wait_until(lambda: False, "y", UNTIL_TEST_TIMEOUT)


def test_a_short_timeout_keeps_its_margin() -> None:
    waiting.set_test_timeout(3.0)  # (the next test's setup sets its own)
    deadline = waiting._deadline
    assert deadline is not None and deadline - time.monotonic() <= 3.0 - MIN_MARGIN
    waiting.set_test_timeout(0)
    assert waiting._deadline is None
