"""The end of a met training and signals (the review's hrev6, items 2 and 6): the hold is
installed before `PreemptionHandler.restore`, which leaves SIGTERM to it (a SIGTERM while
restore joins its watcher gave -15), and a signal during the meeting says the rank is
exiting, not "stopping at the next stop synchronisation"."""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

import pytest

from melissa_trainer.trainer import exit_meeting
from melissa_trainer.trainer.exit_meeting import hold_term, holding
from melissa_trainer.trainer.preemption import PreemptionHandler


@pytest.mark.timeout(60)
def test_a_sigterm_while_restore_joins_its_watcher_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    before = signal.getsignal(signal.SIGTERM)
    handler = PreemptionHandler(parent=None).install()
    try:
        handler.ending = "a source's failure"
        # (the trainer's order: the hold, then restore)
        assert hold_term(grace=300.0, previous=handler.previous_term()) is True
        assert handler._thread is not None
        join = handler._thread.join

        def slow_join(*args: Any, **kwargs: Any) -> None:  # a SIGTERM as restore joins
            signal.raise_signal(signal.SIGTERM)  # (its Python handler runs before this returns)
            join(*args, **kwargs)

        monkeypatch.setattr(handler._thread, "join", slow_join)
        handler.restore()
        assert holding()  # still held: restore left SIGTERM to the hold
        assert exit_meeting._dropped[0] >= 1
    finally:
        handler.restore()
        signal.signal(signal.SIGTERM, before)
        exit_meeting._dropped[0] = 0


@pytest.mark.timeout(60)
def test_the_hold_gives_sigterm_back_to_the_handler_before_the_trainers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    handler = PreemptionHandler(parent=None).install()
    now = [0.0]
    try:
        assert hold_term(grace=30.0, clock=lambda: now[0], previous=handler.previous_term())
        handler.restore()
        now[0] = 31.0
        signal.raise_signal(signal.SIGTERM)  # (its Python handler runs before this returns)
        assert seen == [signal.SIGTERM] and not handler.requested()
    finally:
        handler.restore()
        signal.signal(signal.SIGTERM, before)


@pytest.mark.timeout(60)
def test_a_signal_at_the_meeting_says_the_rank_is_exiting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    handler = PreemptionHandler(parent=None, exit=lambda code: None).install()
    try:
        handler.ending = "a source's failure"
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 30
        while "after the end of training" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        handler.restore()
    assert "SIGINT received after the end of training (a source's failure)" in caplog.text
    assert "stopping at the next stop synchronisation" not in caplog.text


def test_restore_gives_back_the_handlers_it_found() -> None:
    before = signal.getsignal(signal.SIGINT)
    PreemptionHandler(parent=None).install().restore()
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.timeout(60)
def test_a_dropped_sigterm_is_said_later_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    caplog.set_level(logging.WARNING, logger="melissa_trainer.trainer.exit_meeting")
    before = signal.getsignal(signal.SIGTERM)
    exit_meeting._dropped[0] = 0
    try:
        assert hold_term(grace=300.0) is True
        signal.raise_signal(signal.SIGTERM)  # (its Python handler runs before this returns)
        exit_meeting.said_dropped()
        exit_meeting.said_dropped()
    finally:
        signal.signal(signal.SIGTERM, before)
    said = [r.getMessage() for r in caplog.records if "ignored after the end" in r.getMessage()]
    assert said == [
        "1 SIGTERM(s) ignored after the end of training (taken for the launcher's, sent as "
        "another rank exited first: `exit_meeting.hold_term`)"
    ]
