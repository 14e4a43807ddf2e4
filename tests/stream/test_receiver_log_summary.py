"""The receiver under floods of bad messages.

* `LogSummary` (driven by a fake clock): the first event of each reason in full, then
  one summary per period, with the counts and the number of simulations.
* A receiver flooded with 10,000 rejected messages and 10,000 dropped incomplete
  samples logs a handful of lines, and its telemetry counts every one exactly.
"""

from __future__ import annotations

import logging
import re
import time

import numpy as np
import pytest
import zmq
from hardening_runs import F32, messages
from helpers import handled, running
from waiting import wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.log_summary import FAILED, INCOMPLETE, NONFINITE, REJECTED, LogSummary

RECEIVER_LOGGER = "melissa_trainer.stream.receiver"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counted(line: str, verb: str) -> int:
    """The count after `verb` in a summary line ("rejected 1,234 messages"), or 0."""
    match = re.search(verb + r" ([\d,]+) ", line)
    return 0 if match is None else int(match.group(1).replace(",", ""))


def test_log_summary_logs_first_of_each_reason_then_one_summary_per_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "summary")
    clock = FakeClock()
    log = LogSummary(logging.getLogger("summary"), "receiver of rank 0", 30.0, clock)
    for i in range(15_903):
        log.event(INCOMPLETE, "pending_bound", i % 12, f"incomplete {i}")
    for i in range(38):
        log.event(REJECTED, "bad_field", 100 + i % 2, f"bad field {i}")
    log.event(REJECTED, "no_hello", None, "no hello 0")
    log.event(REJECTED, "no_hello", 7, "no hello 1")
    clock.now += 29.9
    log.tick()  # not yet due
    assert messages(caplog) == ["incomplete 0", "bad field 0", "no hello 0"]
    clock.now += 0.1
    log.tick()
    assert messages(caplog)[3:] == [
        "receiver of rank 0: in the last 30 s, dropped 15,903 incomplete samples from 12 "
        "simulations, rejected 40 messages (bad_field: 38, no_hello: 2) from 3 simulations "
        "and unidentified senders"
    ]
    assert not log.pending
    log.tick()  # nothing new: no line
    clock.now += 100
    log.event(REJECTED, "no_hello", 7, "no hello again")  # a new period: in full again
    log.flush()  # all logged in full: no summary
    assert messages(caplog)[4:] == ["no hello again"]


def test_log_summary_of_failed_inferences_by_type_with_the_first_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The serving hook's kind: by exception type, the first of each with the exception
    being handled (`exc_info`), a summary without simulations (an inference is a batch)."""
    caplog.set_level(logging.INFO, "summary")
    clock = FakeClock()
    log = LogSummary(logging.getLogger("summary"), "serving of rank 1", 30.0, clock)
    for error in (RuntimeError, RuntimeError, RuntimeError, KeyError):
        try:
            raise error("the user's bug")
        except Exception as exc:
            log.event(FAILED, type(exc).__name__, None, f"failed: {type(exc).__name__}",
                      exc_info=True)  # fmt: skip
    clock.now += 30
    log.tick()
    assert messages(caplog) == [
        "failed: RuntimeError", "failed: KeyError",
        "serving of rank 1: in the last 30 s, failed 4 inferences (RuntimeError: 3, KeyError: 1)",
    ]  # fmt: skip
    first, second, summary = (r for r in caplog.records if r.name == "summary")
    assert first.exc_info is not None and first.exc_info[0] is RuntimeError
    assert second.exc_info is not None and second.exc_info[0] is KeyError
    assert not summary.exc_info


def test_log_summary_of_one_event_of_each_kind_is_singular(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One event of each kind, each logged in full, then the one after it counted: each
    kind's summary says "1 ..." in the singular (a user trial read "1 inferences")."""
    caplog.set_level(logging.INFO, "summary")
    clock = FakeClock()
    log = LogSummary(logging.getLogger("summary"), "serving of rank 0", 30.0, clock)
    for kind in (FAILED, REJECTED, INCOMPLETE, NONFINITE):
        log.event(kind, "a", 3, "in full")
    log.pending = True  # (every one logged in full: a summary of 1 of each is still due)
    clock.now += 30
    log.tick()
    assert messages(caplog)[-1] == (
        "serving of rank 0: in the last 30 s, dropped 1 incomplete sample from 1 simulation, "
        "rejected 1 message (a: 1) from 1 simulation, refused 1 sample holding NaN or Inf "
        "(a: 1) from 1 simulation (3), failed 1 inference (a: 1)"
    )


def test_log_summary_flood_at_a_steady_pace_logs_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "summary")
    clock = FakeClock()
    log = LogSummary(logging.getLogger("summary"), "r", 30.0, clock)
    for _ in range(100_000):  # 100 s of 1,000 rejections a second
        log.event(REJECTED, "bad_step", 1, "detail")
        clock.now += 0.001
    log.flush()
    lines = messages(caplog)
    # per 30 s period: the first in full, then its summary; 4 periods (the last partial)
    assert lines.count("detail") == 4
    summaries = [m for m in lines if m != "detail"]
    assert len(summaries) == 4
    assert sum(counted(m, "rejected") for m in summaries) == 100_000


def test_log_summary_bounds_the_simulations_it_remembers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "summary")
    log = LogSummary(logging.getLogger("summary"), "r", 30.0, FakeClock())
    for sim in range(50_000):  # random ids: a garbage flood
        log.event(REJECTED, "bad_field", sim, "x")
    log.flush()
    assert messages(caplog)[-1].endswith("from at least 10,000 simulations")
    for _ in range(2):  # garbage whose simulation cannot be read
        log.event(REJECTED, "bad_magic", None, "y")
    log.flush()
    assert messages(caplog)[-1].endswith(
        "rejected 2 messages (bad_magic: 2) from unidentified senders"
    )


def test_log_summary_interval_is_validated() -> None:
    with pytest.raises(ValueError, match="interval"):
        LogSummary(logging.getLogger("summary"), "r", 0.0)


@pytest.mark.timeout(120)
def test_a_flood_of_bad_messages_logs_a_handful_of_lines_and_counts_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, RECEIVER_LOGGER)
    u = P.FieldSpec("u", F32, (4,))
    n = 10_000
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    try:
        started = time.monotonic()
        with running(FIFOBuffer(10), max_pending=4) as rec:
            assert rec.endpoint is not None
            push.connect(rec.endpoint)
            # a simulation of 2 client ranks of which only rank 0 sends: every step stays
            # incomplete, and each one past max_pending drops the oldest
            push.send(P.encode_hello(1, 0, 2, [u], {"p": 1.0}))
            part = np.zeros(2, F32).tobytes()
            for t in range(n + 4):
                push.send(
                    P.encode_data_header(1, t, 0, 2, b"u", P.dtype_code(F32), (4,), 0, 2, True)
                    + part
                )
            # DATA of 100 simulations that never said HELLO
            whole = np.zeros(4, F32).tobytes()
            for i in range(n):
                sim = 1000 + i % 100
                push.send(
                    P.encode_data_header(sim, i, 0, 1, b"u", P.dtype_code(F32), (4,), 0, 4, True)
                    + whole
                )
            # handled, not only read: the last one's rejection is counted after its read
            wait_until(lambda: handled(rec) == 2 * n + 5, "all messages handled")
            tel = rec.telemetry()
        assert tel["incomplete_dropped"] == n
        assert tel["rejected"] == n and tel["rejected_no_hello"] == n
    finally:
        push.close(linger=0)
        ctx.term()
    periods = 1 + int((time.monotonic() - started) // 30)  # 1 unless CI is very slow
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # per 30 s period: one line in full per reason, then the period's summary (the last
    # one at stop)
    assert 3 <= len(lines) <= 3 * periods, lines
    assert 1 <= sum("dropped the incomplete sample" in m for m in lines) <= periods
    assert 1 <= sum("(no_hello): DATA of step" in m for m in lines) <= periods
    assert any("dropped a message from simulation 1000 (no_hello)" in m for m in lines)
    summaries = [m for m in lines if m.startswith("receiver of rank 0: in the last")]
    dropped = sum(counted(m, "dropped") for m in summaries)
    rejected = sum(counted(m, "rejected") for m in summaries)
    assert dropped == n and rejected == n  # the summaries add up to the exact counts
    assert "(no_hello: " in summaries[-1] and "from 100 simulations" in summaries[-1]
