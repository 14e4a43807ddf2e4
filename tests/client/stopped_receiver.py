"""A client whose receiver took its step 0 and then stopped, once the client saw the
disconnection: the set-up of the tests of what a send or a close says of a trainer gone
(tests/client/test_close_preempted_words.py, test_close_run_ended_words.py,
test_close_timed_out_words.py, test_give_up_words.py, test_send_stopped_for_good.py), and
the sends that then block until their receiver counts as gone (`send_until_gone`:
test_give_up_words.py, test_send_preempted_words.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.send_errors import ReceiverGone
from melissa_trainer.stream.stop_record import StopReason

__all__ = ["GONE_CAUSES", "send_until_gone", "sent_then_stopped"]

#: a stop record's reason (None: no record) and what a give-up's clause of the receiver
#: disconnected then says of why it went (`handshake_notes.down_note`): the preempted record's
#: words, else "died or was restarted" (test_words_close_timeout_preempted.py,
#: test_words_send_timeout_preempted.py)
GONE_CAUSES: list[tuple[StopReason | None, str]] = [
    (
        StopReason("preempted", "stopped by SIGTERM"),
        "without a new connection (the trainer was preempted (stopped by SIGTERM; its "
        "stop record in ",
    ),
    (None, "without a new connection (the trainer died or was restarted, or its node)"),
]


def sent_then_stopped(
    fields: dict[str, tuple[tuple[int, ...], Any]],
    simulation_id: int,
    tuning: ClientTuning,
    *,
    rendezvous: Path | None = None,
    reason: StopReason | None = None,
    send_timeout: float | None = None,
) -> tuple[Client, str]:
    """A receiver (a FIFO of 10) takes step 0 (zeros of every field in `fields`) from a
    new client of `simulation_id`, then stops. With `rendezvous`, the receiver is of run
    ``run-a`` there and the client in external mode (endpoints and run id from it);
    without, the client is given the receiver's endpoint. With `reason`, the receiver
    writes it as its stop record, as a trainer's receiver does. Returns, once the
    client's monitors saw the receiver gone, the client (the caller closes it) and the
    receiver's endpoint."""
    room = FIFOBuffer(10)
    config: dict[str, Any] = {}
    if rendezvous is not None:
        config = {"rendezvous_dir": rendezvous, "run_id": "run-a"}
    with running(room, **config) as receiver:
        endpoint = str(receiver.endpoint)
        if reason is not None:
            receiver.note_stop(reason)
        endpoints = endpoint if rendezvous is None else None
        client = Client(
            fields,
            simulation_id=simulation_id,
            endpoints=endpoints,
            send_timeout=send_timeout,
            tuning=tuning,
        )
        client.send(0, **{name: np.zeros(shape, dtype) for name, (shape, dtype) in fields.items()})
        client.flush()
        wait_until(lambda: room.stats().put == 1, "the receiver's sample")
    handshakes = client._transport.handshakes

    def down() -> bool:
        handshakes.read()
        return handshakes.down_since[0] is not None

    wait_until(down, "the client to see the receiver gone")
    return client, endpoint


def send_until_gone(client: Client, **arrays: np.ndarray) -> ReceiverGone:
    """Send `arrays` as time steps 1, 2, ... (999 at most) until a send raises
    `ReceiverGone` (the test fails if none does, or if it raises another error); that
    error. The client is closed without a BYE either way."""
    try:
        with pytest.raises(ReceiverGone) as caught:
            for t in range(1, 1000):
                client.send(t, **arrays)
    finally:
        client.close(bye=False)
    return caught.value
