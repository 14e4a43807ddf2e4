"""What a close that `close_timeout` ended says of a receiver disconnected whose
trainer's stop record says it was preempted: "the trainer was preempted (MESSAGE; its
stop record in DIR)", as a send that `send_timeout` ends says it
(tests/client/test_words_send_timeout_preempted.py), in place of "the trainer died or
was restarted, or its node" (what it said before: `patience.CloseWait.timed_out` did not
ask the record). Still the plain give-up, a `DeliveryFailed` (a `TimeoutError`), not a
`TrainerPreempted` (which a following client would wait on).

Real sockets on 127.0.0.1, a real `Receiver` that writes its stop record as a trainer's
does; `disconnected_timeout` None, so that only `close_timeout` ends the close."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stopped_receiver import GONE_CAUSES, sent_then_stopped

from melissa_trainer.client import ClientTuning, DeliveryFailed
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}


@pytest.mark.parametrize(("reason", "cause"), GONE_CAUSES)
def test_a_close_timeout_says_why_the_receiver_went(
    external: Path, reason: StopReason | None, cause: str
) -> None:
    tuning = ClientTuning(disconnected_timeout=None, close_timeout=1.0, replay_bytes=0)
    client, endpoint = sent_then_stopped(FIELDS, 8, tuning, rendezvous=external, reason=reason)
    client.send(1, u=np.ones(4, np.float32))  # (queued for a receiver gone)
    with pytest.raises(TimeoutError) as caught:
        client.close()
    said = str(caught.value)
    assert type(caught.value) is DeliveryFailed, repr(caught.value)
    assert "within close_timeout=1.0 s to " in said, said
    assert f"the trainer's receiver at {endpoint}" in said, said
    assert cause in said, said
    if reason is not None:
        assert "died" not in said, said
