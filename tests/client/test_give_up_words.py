"""What a `send` that `send_timeout` ended says (a user trial, htrial17 e2/e3/e4): it said
"the trainer is not receiving (back-pressure)" whatever the client knew of its
receiver. Now it says what the sockets' monitors (`handshake.Handshakes`) know, in the
words a close uses (`handshake_notes.never_note`): no connection ever accepted (check the
endpoint), a peer that is not a receiver (check the endpoint), a receiver disconnected
for N s (the trainer died or was restarted: run the simulation again), and back-pressure
only while every receiver is connected (tests/client/test_client_backpressure.py guards that one).
Before `handshake.NOT_ZMQ_AFTER` has decided that a peer is not a receiver (a
`send_timeout` shorter than it), a peer connected at the TCP level says that no
handshake came yet, not "back-pressure" (back-pressure is a receiver, past its
handshake, that is full). A trainer whose stop record says it stopped for good (the run
ended, or failed) is said first, in the close's sentence (`gave_up.stop_sentence`), not
"the trainer died or was restarted"; both failed before the change.

Real sockets on 127.0.0.1; `disconnected_timeout` None, so that only `send_timeout`
ends the sends (a `ReceiverGone` would otherwise come first)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from stopped_receiver import send_until_gone, sent_then_stopped
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning, handshake
from melissa_trainer.client.handshake_words import NOT_RECEIVER
from melissa_trainer.client.send_errors import ReceiverGone
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.stream.stop_record import StopReason

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


def test_a_peer_without_a_handshake_yet_is_not_called_back_pressure(
    silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send_timeout (1 s) shorter than NOT_ZMQ_AFTER (made 60 s: however slow the
    machine, "not a receiver" is not decided yet when the send gives up)."""
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 60.0)
    client = Client(FIELDS, simulation_id=6, endpoints=silent, send_timeout=1.0, tuning=TUNING)
    try:  # (the TCP connection seen first: else "never accepted", true too)
        handshakes = client._transport.handshakes
        wait_until(lambda: not handshakes.never_connected([silent]), "the TCP connection")
        said = give_up(client)
    finally:
        client.close(bye=False)
    assert said.startswith("simulation 6 rank 0: could not send time step "), said
    assert (
        f"{silent} is connected at the TCP level, but no ZeroMQ handshake completed yet (" in said
    ), said
    assert "if this persists, it is not a trainer's receiver: check the endpoint" in said, said
    assert "back-pressure" not in said and NOT_RECEIVER not in said, said


def stopped_for_good(rendezvous: Path, tuning: ClientTuning, send_timeout: float | None) -> Client:
    """A client (simulation 5, external mode: endpoints and run id from `rendezvous`)
    whose receiver took its step 0 and then stopped, its stop record saying that the
    run ended (max_steps reached), as a trainer's receiver writes it; once the client
    saw the disconnection."""
    reason = StopReason("end", "max_steps 7 reached")
    client, _ = sent_then_stopped(
        FIELDS, 5, tuning, rendezvous=rendezvous, reason=reason, send_timeout=send_timeout
    )
    return client


def test_a_send_timeout_says_first_that_the_trainer_stopped_for_good(external: Path) -> None:
    tuning = ClientTuning(
        disconnected_timeout=None, sndhwm=1, failed_close_timeout=1.0, replay_bytes=0
    )
    # (under `SLICE`: a longer send is ended by the record first, `StoppedForGood`,
    # tests/client/test_send_stopped_for_good.py)
    client = stopped_for_good(external, tuning, send_timeout=0.3)
    try:
        said = give_up(client)
    finally:
        client.close(bye=False)
    assert said.startswith("simulation 5 rank 0: the trainer stopped before it read time step "), (
        said
    )
    assert "(end: max_steps 7 reached; its stop record in " in said, said
    assert ENDED in said and "send_timeout=0.3 s" in said, said  # (no run again: it ended)
    assert "died" not in said and "back-pressure" not in said, said


def test_a_receiver_gone_says_first_that_the_trainer_stopped_for_good(external: Path) -> None:
    tuning = ClientTuning(
        disconnected_timeout=0.5, sndhwm=1, failed_close_timeout=1.0, replay_bytes=0
    )
    client = stopped_for_good(external, tuning, send_timeout=None)
    said = str(send_until_gone(client, u=np.ones(COUNT, np.float32)))
    assert said.startswith("simulation 5 rank 0: the trainer stopped before it read time step "), (
        said
    )
    assert "(end: max_steps 7 reached; its stop record in " in said, said
    assert "no trainer comes back there" in said and "died" not in said, said
