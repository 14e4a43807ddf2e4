"""A second Ctrl-C too soon after the first (within `REPEAT_WINDOW`, which dedups the
copies of one signal a launcher forwards) is said at WARNING, with why it was not taken
and when one is (before: an INFO line a user never saw, after a first message that
promised "send it again to exit at once"); the first message names the window."""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.trainer.preemption import PreemptionHandler


@pytest.mark.timeout(30)
def test_a_repeat_too_soon_is_said_at_warning(caplog: Any) -> None:
    exits: list[int] = []
    caplog.set_level(logging.WARNING, logger="melissa_trainer.trainer.preemption")
    # a window of 60 s: the repeat surely lands in it, however slow the machine
    with PreemptionHandler(repeat_window=60.0, exit=exits.append) as handler:
        os.kill(os.getpid(), signal.SIGINT)
        wait_until(handler.requested, "the first signal's request", timeout=UNTIL_TEST_TIMEOUT)
        os.kill(os.getpid(), signal.SIGINT)
    # leaving the block joined the watcher after it read every signal (`restore`)
    assert exits == []
    first, repeat = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "send it again, 60 s or more from now" in first.getMessage()
    said = repeat.getMessage()
    assert said.startswith("SIGINT again") and "taken for the same stop request" in said
    assert "send it again 60 s or more after the first to exit at once" in said
