"""The count of the simulations warned of (a connection closed before its BYE), at the
receiver's stop, says what became of them since, as the receiver heard it
(`connection_lines.fate_in`): given up by the launcher, finished (a restart's BYE read,
as a worker's simulation that failed, returned 1 and ran again), or neither. A new-user
trial read "its data lost unless it runs again" of simulations the launcher had given
up, their samples trained on (tests/study/test_given_up_close_words.py runs that study)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from melissa_trainer.stream.connection_lines import CloseLines, fate_in


def state() -> SimpleNamespace:
    """An ingest state: 1 and 2 given up (abandoned, redrawn), 3 finished and archived,
    4 finished, 5 running, 6 unknown here."""
    ledger = SimpleNamespace
    return SimpleNamespace(
        abandoned={1},
        replaced={2},
        archive={3},
        sims={4: ledger(finished=True), 5: ledger(finished=False)},
    )


def test_fate_in_reads_the_ingest_state() -> None:
    fates = [fate_in(state(), sid) for sid in range(1, 7)]  # type: ignore[arg-type]
    assert fates == ["given up", "given up", "finished", "finished", "", ""]


@pytest.mark.timeout(30)
def test_the_count_says_what_became_of_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "melissa_trainer.stream.receiver")
    lines = CloseLines(1 << 16, lambda: None)
    for sid in (1, 2, 4, 5, 6):
        lines.lost(sid, 0)
    lines.close(False, lambda sid: fate_in(state(), sid))  # type: ignore[arg-type]
    said = caplog.records[-1]
    assert said.levelno == logging.WARNING
    assert said.getMessage() == (
        "5 simulations warned of: a connection closed before its BYE, the steps received "
        "before it kept for training; 2 (1, 2) given up by the launcher since, the rest of "
        "their runs missing; 1 (4) finished since (its BYE read: it ran again, or went on); "
        "2 (5, 6) not finished here, the rest of their runs missing unless they run again"
    ), said.getMessage()
    caplog.clear()
    lines = CloseLines(1 << 16, lambda: None, " (receiver of rank 1)")
    for sid in (3, 4):
        lines.lost(sid, 0)
    lines.close(False, lambda sid: fate_in(state(), sid))  # type: ignore[arg-type]
    assert caplog.records[-1].getMessage() == (
        "2 simulations warned of: a connection closed before its BYE, the steps received "
        "before it kept for training; finished since (their BYEs read: they ran again, or "
        "went on) (receiver of rank 1)"
    )
