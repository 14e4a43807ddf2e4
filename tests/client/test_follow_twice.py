"""A client that followed a restarted trainer follows the next one too, when the first
dies while the steps sent again to it are still in flight: they go again, from the
window, to the trainer resumed after it (exactly once in what that one trains).

The trial tests/trials/trial41_drive.py again_resend (2026-12-04): a serving trainer SIGKILLed
at step 75, resumed from its checkpoint of step 50, and that one SIGKILLed as soon as
both solvers said they followed it (their steps since the checkpoint just sent again),
then a third run resumed: every (simulation, step) trained once, the solvers exiting 0.
This pins the same sequence in-process: the second follow starts from a transport made
by a follow (its `steps`, the window), not from the client's first one.

Real sockets and in-process receivers: A takes steps 0-4, its checkpoint is kept, and it
stops; steps 5-9 go nowhere (kept in the window). B resumes from A's checkpoint; the
send of step 10 follows it (5-9 sent again, then 10) and B is stopped at once, nothing
of it checkpointed: what it took is lost. C resumes from A's checkpoint too; the sends
of 11-14 follow it, and C must hold 0-14, each once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from test_follow_superseded import FIELDS, SID, field, resumable, send_first_steps

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.receiver import Receiver


@pytest.mark.timeout(90)
def test_a_trainer_killed_while_steps_went_again_to_it_is_followed_by_the_next(
    follow_rendezvous: Path,
) -> None:
    rendezvous = follow_rendezvous
    a_buffer, b_buffer, c_buffer = FIFOBuffer(1000), FIFOBuffer(1000), FIFOBuffer(1000)
    a = resumable(a_buffer, rendezvous, "run-a")
    a.start()
    b: Receiver | None = None
    c: Receiver | None = None
    tuning = ClientTuning(disconnected_timeout=2, follow_timeout=30)
    try:
        with Client(FIELDS, {}, simulation_id=SID, tuning=tuning) as client:
            send_first_steps(client, a_buffer)
            record, buffer_state = a.state_dict(), a_buffer.state_dict()
            a.stop()
            for t in range(5, 10):  # (A is gone: kept in the window only)
                client.send(t, u=field(t))

            def resumed(buffer: FIFOBuffer, run_id: str) -> Receiver:
                buffer.load_state_dict(*buffer_state)
                receiver = resumable(buffer, rendezvous, run_id)
                receiver.load_state_dict(record)
                receiver.start()
                return receiver

            b = resumed(b_buffer, "run-b")
            client.send(10, u=field(10))  # follows B: 5-9 sent again, then 10
            assert client.run_id == "run-b"
            b.stop()  # (at once: what B took, or had queued, is lost with it)
            c = resumed(c_buffer, "run-c")
            for t in range(11, 15):
                client.send(t, u=field(t))
            assert client.run_id == "run-c"
        samples = drain(c_buffer)
        steps = sorted(int(s["time_step"]) for s in samples)
        assert steps == list(range(15))  # each once: the checkpoint's 0-4, then 5-14
        for s in samples:  # (the window's copies, not rows overwritten since)
            assert np.array_equal(s["u"], field(int(s["time_step"])))
    finally:
        for receiver in (a, b, c):
            if receiver is not None:
                receiver.stop()
