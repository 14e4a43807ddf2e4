"""`helpers.handled`: the count of messages a receiver has read *and handled*, what a
test waits for before it reads the counters those messages change.

``telemetry()["messages"]`` counts a message as the ingester reads it, before it is
decoded and handled: a test that waited for that count and then read the rejections,
the duplicates or the simulations waited for could read them one message short, when
its poll fell between the read of the last message and its handling (a window of
microseconds: a rare flake on a loaded machine, as in tests/stream/
test_restart_order.py, test_receiver_log_summary.py and test_receiver_bounds.py,
which waited so). Here the ingester is held in that window (in the rejection of the
last message) to show both counts there.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import zmq
from helpers import handled, running
from waiting import wait_until

from melissa_trainer import wire as P
from melissa_trainer.stream.ingest import Ingest

F32 = np.dtype("<f4")


@pytest.mark.timeout(60)
def test_a_message_read_and_not_yet_handled_is_not_counted_handled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entered, release = threading.Event(), threading.Event()
    reject = Ingest.reject

    def held_reject(self: Ingest, reason: str, sim: int | None, detail: str) -> None:
        entered.set()  # the message is read (counted), its rejection not yet counted
        release.wait(30)
        reject(self, reason, sim, detail)

    monkeypatch.setattr(Ingest, "reject", held_reject)
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    try:
        with running() as rec:
            assert rec.endpoint is not None
            push.connect(rec.endpoint)
            whole = np.zeros(4, F32).tobytes()  # DATA of a simulation that never said HELLO
            push.send(
                P.encode_data_header(9, 0, 0, 1, b"u", P.dtype_code(F32), (4,), 0, 4, True) + whole
            )
            assert entered.wait(30), "the DATA was not read"
            # what a wait on the read count found: the message counted, not its rejection
            telemetry = rec.telemetry()
            assert (telemetry["messages"], telemetry["rejected_no_hello"]) == (1, 0)
            assert handled(rec) == 0
            release.set()
            wait_until(lambda: handled(rec) == 1, "the DATA handled", 30)
            assert rec.telemetry()["rejected_no_hello"] == 1  # final once handled
    finally:
        release.set()
        push.close(linger=0)
        ctx.term()
