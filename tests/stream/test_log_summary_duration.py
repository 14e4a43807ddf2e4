"""A summary's period reads right however short it was: a study stopped at once by
refusals flushed a summary of "in the last 0 s" (trial 6 F7)."""

from __future__ import annotations

import logging

import pytest

from melissa_trainer.stream.log_summary import REJECTED, LogSummary


@pytest.mark.parametrize(
    ("elapsed", "said"),
    [(0.0, "in the last second,"), (0.4, "in the last second,"), (1.0, "in the last 1 s,"),
     (30.2, "in the last 30 s,"), (4000.0, "in the last 4,000 s,")],
)  # fmt: skip
def test_the_period_of_a_flushed_summary_reads_right(
    elapsed: float, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    log = logging.getLogger("test_log_summary_duration")
    summary = LogSummary(log, "receiver of rank 0", interval=10_000, clock=lambda: now[0])
    for _ in range(3):
        summary.event(REJECTED, "bad_field", 4, "first")
    now[0] += elapsed
    caplog.clear()  # (the first event's line, in full)
    with caplog.at_level(logging.WARNING, logger=log.name):
        summary.flush()
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"receiver of rank 0: {said} rejected 3 messages"), line
