"""An in-process `predict_batch` from a thread other than the training thread
(`serving_in_process.queued`) is queued all or none: a batch refused ``busy`` (the
queue has room for part of it) or ValueError (one sample not the declared inputs) has
none of its requests left in the queue, to be run later for a caller that was told it
was refused and never reads their answers.

Found in a user trial (hserve, 2026-12-05): the requests before the one refused stayed
queued. Failed before: both tests (the busy detail said nothing of the batch, and its
first request stayed queued: 4 waiting, not 3; with a wrong sample, 2 waiting, not 1).

A real `PredictServer` (its queue), which no one drains until the test says so: the
queue is filled with requests whose caller gave up (their wait timed out, they stay
queued until a drain drops them, expired); then one drain answers what fits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from predict_server import INPUTS, VERSION, drain

from melissa_trainer.hooks.serving_in_process import queued
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_queue import ServingRefused

pytestmark = pytest.mark.timeout(60)

U = np.array([0.0, 1.0, 2.0, 3.0], np.float32)


def filled(waiting: int) -> PredictServer:
    """A serving `PredictServer` of `max_queue` 4 with `waiting` requests queued, their
    callers gone (each `queued` call timed out: no one drains)."""
    srv = PredictServer(INPUTS, max_queue=4)
    srv.start()
    srv.serving = True
    with pytest.raises(
        TimeoutError, match="no training step ended within 0.001 s to serve the request"
    ):
        queued(srv, [{"u": U}] * waiting, 0.001)
    assert srv.pending() == waiting
    return srv


def test_a_batch_refused_busy_partway_leaves_nothing_queued() -> None:
    srv = filled(3)
    stop = threading.Event()
    thread = None
    try:
        with pytest.raises(ServingRefused) as raised:
            queued(srv, [{"u": U}, {"u": U + 1}], 30)  # room for 1 of 2
        assert raised.value.reason == "busy"
        text = str(raised.value)
        assert "3 of 4 places" in text and "batch of 2 (none of it was queued)" in text, text
        assert srv.pending() == 3  # (before: 4, the batch's first request)
        assert srv.telemetry()["refused_busy"] == 2, srv.telemetry()
        thread = drain(srv, stop)  # (the gone callers' requests dropped: expired)
        (out,), version = queued(srv, [{"u": U}], 30)
        assert version == VERSION
        np.testing.assert_array_equal(out["y"], 2 * U + VERSION)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        srv.stop()


def test_a_batch_with_one_wrong_sample_leaves_nothing_queued() -> None:
    srv = filled(1)
    try:
        with pytest.raises(ValueError, match="input 'u' is <f8"):
            queued(srv, [{"u": U}, {"u": U.astype(np.float64)}], 30)
        assert srv.pending() == 1  # (before: 2, the batch's first request)
    finally:
        srv.stop()
