"""The serving counters tell the replies sent after their client gave up (htrial27: the
trainer's summary said "151 answered" where the solver received 145: ``answered``
counted every reply sent, 6 of them past their client's timeout, taken from the queue
in time and run too late). ``answered`` is kept (every reply sent); ``answered_late``
counts those of them that went past their client's timeout, in the telemetry, the log
figures (``serving_answered_late``: console, TensorBoard ``serving/answered_late``) and
the end-of-run line. Each test failed before (no such count)."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.hooks.serving_report import log_figures, summary
from melissa_trainer.stream.serving import PredictServer


@pytest.mark.timeout(60)
def test_a_reply_past_its_client_s_timeout_is_counted_late_too(server: PredictServer) -> None:
    server.serving = True
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(server.endpoint or "")
        u = np.ones(4, np.float32)
        sock.send_multipart(protocol.encode_predict(1, 1, 1000, "run-a", {"u": u}))  # 1 s
        sock.send_multipart(protocol.encode_predict(1, 2, 1000, "run-a", {"u": u}))
        while server.pending() < 2:
            server.wait_pending(0.05)
        first, second = server.take(8)
        # (the second's inference lasted 10 s, as the clock would say: no sleep)
        second.received -= 10
        for pending in (first, second):
            server.answer(pending, {"y": np.zeros(2, np.float32)}, 0)
        counts = server.telemetry()
        assert counts["answered"] == 2 and counts["answered_late"] == 1, counts
    finally:
        sock.close(linger=0)
        ctx.term()


def test_the_late_answers_are_in_the_figures_and_the_summary() -> None:
    telemetry = {"requests": 151, "answered": 151, "answered_late": 6, "batches": 140}
    figures = log_figures(telemetry)
    assert figures["serving_answered"] == 151 and figures["serving_answered_late"] == 6
    line = summary(0, telemetry)
    assert "151 answered in 140 batches (6 of them late: past their client's timeout, " in line
    # (none late: the line as before)
    assert "3 answered in 1 batch, " in summary(0, {"requests": 3, "answered": 3, "batches": 1})
    assert log_figures({})["serving_answered_late"] == 0.0  # (every key, always)
