"""A running client follows a restarted trainer of two ranks keeping its routing
(docs/protocol.md sections 3 and 17): simulation 7, routed ``(7 + t) % 2`` (the
rendezvous advertises it), streams to receivers A0, A1; they take a checkpoint (record
and buffer each), take more steps, stop; B0, B1 resume from that checkpoint under a new
run id; the client asks each what it holds (bits read by its routing), says HELLO with
the same routing (B's record keeps it: another would be refused) and sends the rest
again from its replay window.

The oracle: B's buffers (the checkpoint's samples plus what B received) hold every time
step once, each on the rank ``(7 + t) % 2``, and nothing was rejected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.wire.routing import SIMULATION_STEP, receiver_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SID = 7


def mine(rank: int, steps: range) -> int:
    return sum(1 for t in steps if receiver_of(SID, t, 2, SIMULATION_STEP) == rank)


class Trainer:
    """Two receivers in `rendezvous`, as one trainer's ranks."""

    def __init__(self, rendezvous: Path, run_id: str) -> None:
        self.buffers = [FIFOBuffer(1000), FIFOBuffer(1000)]
        config = ReceiverConfig(
            expected_simulations=1, bind="tcp://127.0.0.1:*", rendezvous_dir=str(rendezvous),
            run_id=run_id,
        )  # fmt: skip
        self.receivers = [Receiver(self.buffers[r], r, 2, config) for r in range(2)]

    def stop(self) -> None:
        for r in self.receivers:
            r.stop()


def test_a_client_follows_two_resumed_ranks_keeping_its_routing(follow_rendezvous: Path) -> None:
    rendezvous = follow_rendezvous
    a = Trainer(rendezvous, "run-a")
    b: Trainer | None = None
    try:
        for r in a.receivers:
            r.start()
        tuning = ClientTuning(disconnected_timeout=2, follow_timeout=30)
        with Client({"u": ((3,), "<f4")}, {}, simulation_id=SID, tuning=tuning) as c:
            assert c.routing == SIMULATION_STEP
            for t in range(5):
                c.send(t, u=np.full(3, t, "<f4"))
            c.flush()
            for r in range(2):
                wait_until(
                    lambda r=r: a.buffers[r].stats().put == mine(r, range(5)), "A's samples", 30
                )
            records = [r.state_dict() for r in a.receivers]
            buffers = [buf.state_dict() for buf in a.buffers]
            for t in range(5, 10):  # taken by A after its checkpoint: lost with it
                c.send(t, u=np.full(3, t, "<f4"))
            c.flush()
            for r in range(2):
                wait_until(
                    lambda r=r: a.buffers[r].stats().put == mine(r, range(10)), "A's later", 30
                )
            a.stop()
            b = Trainer(rendezvous, "run-b")
            for r, rec in enumerate(b.receivers):
                b.buffers[r].load_state_dict(*buffers[r])
                rec.load_state_dict(records[r])
                rec.start()
            for t in range(10, 15):
                c.send(t, u=np.full(3, t, "<f4"))
            assert c.run_id == "run-b" and c.routing == SIMULATION_STEP
        got = [sorted(int(s["time_step"]) for s in drain(buf)) for buf in b.buffers]
        rejected = sum(int(r.ingest.telemetry()["rejected"]) for r in b.receivers)
    finally:
        a.stop()
        if b is not None:
            b.stop()
    # each once: the checkpoint's 0-4, then 5-14, each on its rank (7 + t) % 2
    assert got == [[t for t in range(15) if (SID + t) % 2 == r] for r in range(2)]
    assert rejected == 0
