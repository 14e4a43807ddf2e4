"""A receiver stopped (its trainer ended: max_steps) while samples a pump could not put
wait in the feeder's `overflow` writes no ``unfinished``: those steps are marked
completed but never reached the buffer, and a close told from the record that every
step it sent was taken would be told that nothing was lost (`build_record`'s `held`;
docs/protocol.md, "The stop record"). `Receiver.stop` computes `held` from
`puts_lost`, which only `IngestLoop._end` sets from `overflow`; a stop requested
without an end (`_Stopped`) left it False (review hrev6, finding 2): now it looks at
the overflow too.

Real parts: a `Receiver` on a FIFO of 2, its socket fed by the reference encoder
(`reference_protocol`) a BATCH of 5 steps, ingested by the training thread's pump (the
receiver's thread idle: its takeover an hour). The oracle: the buffer holds 2 samples,
so the record must not say 5 held."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver_config import ReceiverTuning
from melissa_trainer.stream.stop_record import StopReason

SID = 3
U = R.Field("u", "<f4", (4,))


def batch(steps: list[int]) -> bytes:
    head = R.part_header(R.BATCH, SID, len(steps), 0, 1, U, 0, U.size, False)
    rows = (t.to_bytes(8, "little") + np.full(4, t, np.float32).tobytes() for t in steps)
    return head + b"".join(rows)


@pytest.mark.timeout(60)
def test_steps_left_in_the_overflow_are_not_said_held(tmp_path: Path) -> None:
    rv, buffer = tmp_path / "rv", FIFOBuffer(2)
    with running(buffer, rendezvous_dir=str(rv), tuning=ReceiverTuning(takeover=3600.0)) as rec:
        rec.pump()  # (the training thread pumps: the receiver's thread stays idle)
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        try:
            sock.connect(rec.endpoint)
            sock.send(R.encode_hello(SID, 0, 1, R.hello_body([U], {})))
            sock.send(batch([0, 1, 2, 3, 4]))
            deadline = time.monotonic() + 30
            while len(buffer) < 2:  # (the pump puts 2, keeps the rest for later)
                assert time.monotonic() < deadline, "the batch was not ingested"
                rec.pump(wait=0.2)
            rec.note_stop(StopReason("end", "max_steps 9 reached"))
        finally:
            sock.close(linger=0)
            ctx.term()
    assert len(buffer) == 2  # the oracle: 3 of the 5 steps never reached the buffer
    record = json.loads((rv / "rank_0.json").read_text())["stop_record"]
    held = dict((sid, steps) for sid, steps, *_ in record.get("unfinished") or [])
    assert held.get(SID, 0) <= len(buffer), record.get("unfinished")
