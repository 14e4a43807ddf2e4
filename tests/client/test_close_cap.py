"""A close's delivery phase, bounded by ``close_timeout`` *without progress*
(test_close_delivery_progress.py), is bounded in all too: `delivery.CLOSE_CAP_FACTOR`
times ``close_timeout`` from the close's start. Before, a receiver that took a message
now and then (a trickle) kept the close, and the solver's exit, alive for ever: each
message moved the deadline again.

A real PULL socket (`slow_pull`: RCVHWM 1, a small kernel buffer) reads one message
every PACE s, five per close_timeout (progress all along); the client queued STEPS
arrays sent without a copy, which take more than the cap to read. The close gives up
at the cap, in `delivery.capped_words`. The C client: tests/c/test_c_close_cap.py."""

from __future__ import annotations

import numpy as np
import pytest
from slow_pull import slow_pull

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR, capped_words

pytestmark = pytest.mark.timeout(120)

SID, STEPS = 7, 120
COUNT = 32768  # float64: 256 KiB a step, sent without a copy (ZeroMQ lets go once written)
PACE = 0.2  # s between two reads: 100 reads at least (the kernel holds a few), 20 s
CLOSE_TIMEOUT = 1.0  # (five reads each: progress; the cap, 10 s, before the last read)


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_trickle_ends_the_close_at_the_cap_in_its_words() -> None:
    with slow_pull(PACE) as receiver:
        tuning = ClientTuning(close_timeout=CLOSE_TIMEOUT, disconnected_timeout=600.0)
        client = Client(
            {"u": ((COUNT,), np.float64)}, simulation_id=SID, endpoints=receiver.endpoint,
            tuning=tuning, array_reuse="never",
        )  # fmt: skip
        for t in range(STEPS):
            client.send(t, u=np.full(COUNT, t, np.float64))
        receiver.start()
        with pytest.raises(TimeoutError) as caught:  # (before: it returned, 20 s and more)
            client.close()
        taken = len(receiver.keys)
    said = str(caught.value)
    words = capped_words("close_timeout", CLOSE_TIMEOUT, "ClientTuning.close_timeout", SID)
    assert said.startswith(
        f"simulation {SID} rank 0: queued messages not delivered within {CLOSE_CAP_FACTOR} x "
        f"close_timeout={CLOSE_TIMEOUT} s in all to ['{receiver.endpoint}']: {words}"
    ), said
    assert 0 < taken < STEPS, taken  # (it progressed; it was not done)
