"""What a close that `close_timeout` ended says of a receiver disconnected then (the
trainer died or was restarted): the words of a send that gave up
(`handshake_notes.down_note`, tests/client/test_give_up_words.py), after "not delivered within
close_timeout=X s" (which users and tests grep). Before the change it said only that
the time ran out, as if the trainer were there and slow.

Real sockets on 127.0.0.1: a receiver started, sent to, and stopped (its port then
refuses the reconnections). `disconnected_timeout` is 600 s, so only `close_timeout`
can end the close: the outcome does not depend on when ZeroMQ saw the refusals."""

from __future__ import annotations

import pytest
from stopped_receiver import sent_then_stopped

from melissa_trainer.client import ClientTuning

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}


def test_a_close_timeout_says_the_receiver_is_disconnected() -> None:
    tuning = ClientTuning(close_timeout=1.0, disconnected_timeout=600.0)
    # (returned once the client saw the receiver gone: what the close then knows)
    client, endpoint = sent_then_stopped(FIELDS, 7, tuning)
    with pytest.raises(TimeoutError) as caught:
        client.close()  # (its BYE cannot leave: nobody takes it)
    said = str(caught.value)
    assert "queued messages not delivered within close_timeout=1.0 s" in said, said
    assert f"the trainer's receiver at {endpoint} is disconnected for " in said, said
    assert "the trainer died or was restarted" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=7" in said, said  # (what to do: run it again)
    assert "back-pressure" not in said and "ever accepted" not in said, said
