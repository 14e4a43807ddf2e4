"""What a `send` that `send_timeout` ended says (a user trial, htrial17 e2/e3/e4): it said
"the trainer is not receiving (back-pressure)" whatever the client knew of its
receiver. Now it says what the sockets' monitors (`handshake.Handshakes`) know, in the
words a close uses (`handshake.never_note`): no connection ever accepted (check the
endpoint), a peer that is not a receiver (check the endpoint), a receiver disconnected
for N s (the trainer died or was restarted: run the simulation again), and back-pressure
only while every receiver is connected (tests/client/test_client.py guards that one).

Real sockets on 127.0.0.1; `disconnected_timeout` None, so that only `send_timeout`
ends the sends (a `ReceiverGone` would otherwise come first)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning, handshake
from melissa_trainer.client.handshake import NOT_RECEIVER
from melissa_trainer.client.send_wait import ReceiverGone

pytestmark = pytest.mark.timeout(60)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}
TUNING = ClientTuning(disconnected_timeout=None, sndhwm=1, failed_close_timeout=1.0)


def give_up(client: Client) -> str:
    """Send until a send gives up; its message (not `ReceiverGone`: no bound set)."""
    u = np.ones(COUNT, np.float32)
    with pytest.raises(TimeoutError) as caught:
        for t in range(1000):
            client.send(t, u=u)
    assert not isinstance(caught.value, ReceiverGone)
    return str(caught.value)


@pytest.fixture
def silent() -> Iterator[str]:
    """A program that accepts TCP connections (the kernel does, on listen) and never
    speaks ZeroMQ, as ``python -m http.server`` to a ZeroMQ greeting."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


def test_never_connected_says_check_the_endpoint() -> None:
    with socket.socket() as held:  # (bound, not listening: every connection refused)
        held.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{held.getsockname()[1]}"
        client = Client(
            FIELDS, simulation_id=1, endpoints=endpoint, send_timeout=1.0, tuning=TUNING
        )
        try:
            said = give_up(client)
        finally:
            client.close(bye=False)
    assert said.startswith(
        "simulation 1 rank 0: could not send time step 0 within send_timeout=1.0 s"
    )
    assert f"no receiver ever accepted a connection at {endpoint}: check the endpoint" in said
    assert "back-pressure" not in said and "died" not in said, said


def test_a_peer_not_a_receiver_says_check_the_endpoint(
    silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.3)
    client = Client(FIELDS, simulation_id=2, endpoints=silent, send_timeout=2.0, tuning=TUNING)
    try:
        said = give_up(client)
    finally:
        client.close(bye=False)
    assert f"{silent}: {NOT_RECEIVER}" in said, said
    assert "back-pressure" not in said and "died" not in said, said


def test_a_receiver_gone_says_disconnected_and_run_again() -> None:
    room = FIFOBuffer(10)
    with running(room) as receiver:
        endpoint = str(receiver.endpoint)
        client = Client(
            FIELDS, simulation_id=3, endpoints=endpoint, send_timeout=1.0, tuning=TUNING
        )
        client.send(0, u=np.zeros(COUNT, np.float32))
        client.flush()
        wait_until(lambda: room.stats().put == 1, "the receiver's sample")
    try:  # (the receiver stopped: its port refuses the reconnections)
        said = give_up(client)
    finally:
        client.close(bye=False)
    assert f"the trainer's receiver at {endpoint} is disconnected for " in said, said
    assert "the trainer died or was restarted" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=3" in said, said  # (what to do: run it again)
    assert "back-pressure" not in said and "ever accepted" not in said, said
