"""What a send that `send_timeout` ended says of a receiver disconnected whose trainer's
stop record says it was preempted: "the trainer was preempted (MESSAGE; its stop record
in DIR)", as the send that `disconnected_timeout` ends says
(tests/client/test_send_preempted_words.py), in place of "the trainer died or was
restarted, or its node" (what it said before: one sentence builder,
`handshake_notes.down_note`, told the cause). Still the plain give-up, a
`DeliveryFailed` (not followed).

Real sockets on 127.0.0.1, a real `Receiver` that writes its stop record as a trainer's
does; `disconnected_timeout` None, so that only `send_timeout` ends the send."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stopped_receiver import GONE_CAUSES, sent_then_stopped

from melissa_trainer.client import ClientTuning, DeliveryFailed
from melissa_trainer.client.send_errors import ReceiverGone
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}


@pytest.mark.parametrize(("reason", "cause"), GONE_CAUSES)
def test_a_send_timeout_says_why_the_receiver_went(
    external: Path, reason: StopReason | None, cause: str
) -> None:
    tuning = ClientTuning(
        disconnected_timeout=None, sndhwm=1, failed_close_timeout=1.0, replay_bytes=0
    )
    client, endpoint = sent_then_stopped(
        FIELDS, 8, tuning, rendezvous=external, reason=reason, send_timeout=0.3
    )
    u = np.ones(COUNT, np.float32)
    try:
        with pytest.raises(TimeoutError) as caught:
            for t in range(1, 1000):
                client.send(t, u=u)
    finally:
        client.close(bye=False)
    said = str(caught.value)
    assert not isinstance(caught.value, ReceiverGone), said  # (send_timeout ended it)
    assert type(caught.value) is DeliveryFailed, repr(caught.value)  # (a worker goes on)
    assert said.startswith("simulation 8 rank 0: could not send time step "), said
    assert "within send_timeout=0.3 s: the trainer's receiver at " + endpoint in said, said
    assert cause in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=8" in said, said  # (what to do)
    if reason is not None:
        assert "died" not in said and "back-pressure" not in said, said
