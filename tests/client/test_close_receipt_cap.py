"""A close's receipt phase, bounded by ``close_timeout`` *without progress*
(test_close_progress.py), is bounded in all too, as its delivery phase is
(test_close_cap.py): `delivery.CLOSE_CAP_FACTOR` times ``close_timeout`` from the close's
start, one budget for the whole close. Before, a trainer that ingested a step now and
then (a trickle) kept its receipts progressing, and the close, and the solver's exit,
alive for ever: each step it ingested moved the deadline again.

A real receiver on a FIFO of 2 is drained one sample per answered receipt question
(`drain_slowly`: events; each "not yet" is held `RECEIPT_HOLD`, 0.5 s): progress well
within ``close_timeout`` all along, but the STEPS take twice the cap to ingest. The close
gives up at the cap, in `delivery.capped_words`. The C client:
tests/c/test_c_close_receipt_cap.py."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from slow_drain import drain_slowly

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR, capped_words
from melissa_trainer.client.tuning import ClientTuning

pytestmark = pytest.mark.timeout(180)

SID = 6
CLOSE_TIMEOUT = 2.0  # (the cap: 20 s; a sample ingested every 0.5 s or so: progress)
STEPS = 80  # (40 s of ingest at least: twice the cap)


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_trickle_of_receipts_ends_the_close_at_the_cap_in_its_words(external: Path) -> None:
    buffer, taken, closed = FIFOBuffer(2), [], threading.Event()
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        tuning = ClientTuning(close_timeout=CLOSE_TIMEOUT, batch_bytes=0)
        client = Client(simulation_id=SID, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.float64))
        drainer = drain_slowly(receiver, buffer, taken, closed, STEPS, every=1)  # type: ignore[arg-type]
        try:
            with pytest.raises(TimeoutError) as caught:  # (before: it returned, 40 s on)
                client.close()
        finally:
            closed.set()  # (the rest: taken at once)
            drainer.join(60)
    said = str(caught.value)
    words = capped_words("close_timeout", CLOSE_TIMEOUT, "ClientTuning.close_timeout", SID)
    head = (
        f"simulation {SID} rank 0: the trainer did not confirm this simulation's BYE within "
        f"{CLOSE_CAP_FACTOR} x close_timeout={CLOSE_TIMEOUT} s in all: its receivers [0] "
        f"ingested "
    )
    tail = f" of the {STEPS} steps this rank sent them: {words}"
    found = re.fullmatch(re.escape(head) + "([0-9]+)" + re.escape(tail), said)
    assert found is not None, said
    assert 0 < int(found.group(1)) < STEPS, said  # (it progressed; it was not done)
