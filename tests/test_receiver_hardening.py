"""The receiver under abuse: floods of bad messages, stalled peers, bad options.

* `LogSummary` (driven by a fake clock): the first event of each reason in full, then
  one summary per period, with the counts and the number of simulations.
* A receiver flooded with 10,000 rejected messages and 10,000 dropped incomplete
  samples logs a handful of lines, and its telemetry counts every one exactly.
* A raw TCP peer (no ZeroMQ on its side) that completes the ZMTP 3.1 NULL handshake
  as a PUSH socket, announces a 512 MiB frame, sends 96 MiB of it and stalls: with
  `heartbeat` set the receiver closes its connection and the receiver's memory comes
  back, while a `Client` streaming a simulation meanwhile gets every step into the
  buffer; without `heartbeat` the connection stays open (the control case).
* Option validation.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import zmq

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import protocol as P
from melissa_trainer.stream.log_summary import INCOMPLETE, REJECTED, LogSummary
from melissa_trainer.stream.receiver import Receiver

RECEIVER_LOGGER = "melissa_trainer.stream.receiver"
F32 = np.dtype("<f4")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counted(line: str, verb: str) -> int:
    """The count after `verb` in a summary line ("rejected 1,234 messages"), or 0."""
    match = re.search(verb + r" ([\d,]+) ", line)
    return 0 if match is None else int(match.group(1).replace(",", ""))


def messages(caplog: pytest.LogCaptureFixture, name: str = "summary") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name]


# -- LogSummary --------------------------------------------------------------------------


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


def test_log_summary_interval_is_validated() -> None:
    with pytest.raises(ValueError, match="interval"):
        LogSummary(logging.getLogger("summary"), "r", 0.0)


# -- a receiver flooded ---------------------------------------------------------------------


@contextmanager
def running(buffer: Any = None, **kw: Any) -> Iterator[Receiver]:
    rec = Receiver(buffer if buffer is not None else FIFOBuffer(1000), **kw)
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()


def wait_for(cond: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(0.01)


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
            wait_for(lambda: rec.telemetry()["messages"] == 2 * n + 5, what="all messages read")
            tel = rec.telemetry()
        assert tel["incomplete_dropped"] == n
        assert tel["rejected"] == n and tel["rejected_no_hello"] == n
    finally:
        push.close(linger=0)
        ctx.term()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # one line in full per reason, then the summaries (one at stop; a run slower than
    # the 30 s interval adds one per interval)
    assert 3 <= len(lines) <= 6, lines
    assert sum("dropped the incomplete sample" in m for m in lines) == 1
    assert sum("dropped a message from simulation 1000 (no_hello)" in m for m in lines) == 1
    summaries = [m for m in lines if m.startswith("receiver of rank 0: in the last")]
    dropped = sum(counted(m, "dropped") for m in summaries)
    rejected = sum(counted(m, "rejected") for m in summaries)
    assert dropped == n and rejected == n  # the summaries add up to the exact counts
    assert "(no_hello: " in summaries[-1] and "from 100 simulations" in summaries[-1]
