"""Failures grouped by their key (`systematic.failure_key`, durations and clock times
masked: "tried for 69 s" and "70 s" are one failure) said with the range of those
figures over the attempts grouped, not the first (or last) one's figure alone: the
study's stop on a systematic failure quoted "tried for 67 s" for attempts that tried
for 67 to 70 s, and the report of simulations that failed alike showed the first one's
log only.

The log text is the C client's close of a trial (tests/launcher/test_systematic_fortran.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.launcher.reports import failure_report
from melissa_trainer.launcher.systematic import SystematicFailure

pytestmark = pytest.mark.timeout(30)

CLOSE = (
    "melissa_trainer: mt_close: simulation {s} rank 0: queued messages not delivered to "
    "tcp://localhost:5599: the receiver is unreachable, tried for {t} s "
    "(mt_set_disconnected_timeout=60.0 s)"
)


def close_line(sid: int, seconds: int) -> str:
    return CLOSE.format(s=sid, t=seconds)


def test_each_differing_figure_is_said_as_its_range() -> None:
    from melissa_trainer.launcher.systematic import spanned  # (added with the fix)

    assert spanned(["diverged after 3.2 s", "diverged after 4.1 s", "diverged after 3.5 s"]) == (
        "diverged after 3.2-4.1 s"
    )
    # by number, not as text ("10" < "9" as text); clock times by time; agreeing figures kept
    assert spanned(["at 10:00:05 after 9 s, 1 s", "at 10:00:01 after 10 s, 1 s"]) == (
        "at 10:00:01-10:00:05 after 9-10 s, 1 s"
    )
    assert spanned(["failed after 3 s", "failed after 3 s"]) == "failed after 3 s"


def test_clock_times_over_midnight_are_said_as_the_span_they_cover() -> None:
    """Found in review (hrev9, 2026-12-07): clock times were sorted as text, so attempts
    at 23:59:58, 00:00:02 and 23:59:59 were said "00:00:02-23:59:59" (a whole day). The
    oracle: the span that holds them, by hand."""
    from melissa_trainer.launcher.systematic import spanned

    lines = ["died at 23:59:58", "died at 00:00:02", "died at 23:59:59"]
    assert spanned(lines) == "died at 23:59:58-00:00:02"
    # within one day, the earliest and the latest, as before
    assert spanned(["at 10:00:05", "at 09:59:01", "at 10:00:01"]) == "at 09:59:01-10:00:05"
    assert spanned(["at 00:00:00", "at 12:00:01"]) == "at 12:00:01-00:00:00"


def test_the_study_stop_says_the_range_of_the_attempts(tmp_path: Path) -> None:
    check = SystematicFailure(4)
    said = []
    for attempt, (sid, seconds) in enumerate([(1, 70), (0, 69), (1, 69), (0, 67)]):
        log = tmp_path / f"sim-{sid}-{attempt}.log"
        log.write_text(close_line(sid, seconds) + "\n")
        said.append(check.failed(sid, 8, log))
    assert said[:3] == [None, None, None] and said[3] is not None
    assert "tried for 67-70 s (mt_set_disconnected_timeout=60.0 s)" in said[3], said[3]
    assert "(its figures' range over the attempts)" in said[3], said[3]


def test_the_stop_quotes_the_line_as_it_is_when_the_figures_agree(tmp_path: Path) -> None:
    check = SystematicFailure(2)
    for sid in range(2):
        (tmp_path / f"sim-{sid}.log").write_text(close_line(sid, 69) + "\n")
        said = check.failed(sid, 8, tmp_path / f"sim-{sid}.log")
    assert said is not None and f"last log line {close_line(1, 69)!r}." in said, said


def test_the_report_of_simulations_failed_alike_says_the_range(tmp_path: Path) -> None:
    logs = {}
    for sid, seconds in enumerate([69, 72, 70]):
        logs[sid] = tmp_path / f"sim-{sid}.log"
        logs[sid].write_text(close_line(sid, seconds) + "\n")
    failed = [(sid, f"simulation {sid} failed", (8,)) for sid in logs]
    kinds = [line for line in failure_report(failed, logs.__getitem__, tmp_path) if "alike" in line]
    assert len(kinds) == 1 and "3 simulations (0, 1, 2) failed alike" in kinds[0], kinds
    assert (
        f"its figures over them: {close_line(0, 0).replace('for 0 s', 'for 69-72 s')!r}"
        in (kinds[0])
    ), kinds[0]
