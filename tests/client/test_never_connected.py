"""A Python client streaming to an endpoint where no receiver ever accepted a connection
(a wrong port, a trainer not started): its close, and a wait that gave up on a receiver
disconnected (a blocked send's, a close's), say so and what to check, as the C client
does (tests/c/test_c_endpoint_never.py). A user trial found the close saying only
"queued messages not delivered within close_timeout=0.5 s to ['tcp://127.0.0.1:1']".
Before the change the note was in no message here.

A receiver that accepted the connection is not said to be one never connected. Real
sockets on 127.0.0.1: port 1 and a port bound and held (`held_ports`) refuse every connection at
once; the "paused trainer" is a TCP listener that accepts and never speaks ZeroMQ."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import numpy as np
import pytest
from held_ports import refused_endpoint

from melissa_trainer.client import Client, ClientTuning

FIELDS = {"u": ((4,), "float32")}


def never(endpoint: str) -> str:
    return (
        f"no receiver ever accepted a connection at {endpoint}: check the endpoint (the "
        "trainer's rank_N.json) or start the trainer first"
    )


@pytest.fixture
def paused() -> Iterator[socket.socket]:
    """A trainer that accepts connections and reads nothing."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener


@pytest.mark.timeout(30)
def test_the_close_says_no_receiver_ever_accepted_a_connection() -> None:
    endpoint = "tcp://127.0.0.1:1"
    with (
        pytest.raises(TimeoutError) as caught,
        Client(
            FIELDS, simulation_id=2, endpoints=endpoint, tuning=ClientTuning(close_timeout=0.5)
        ) as client,
    ):
        client.send(0, u=np.ones(4, np.float32))
    said = str(caught.value)
    assert said.startswith(
        "simulation 2 rank 0: queued messages not delivered within close_timeout=0.5 s to "
        f"['{endpoint}'] (ClientTuning(close_timeout=...)"
    ), said
    assert said.endswith(f"connected): {never(endpoint)}"), said


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    endpoint = refused_endpoint()
    tuning = ClientTuning(close_timeout=0.5)
    client = Client(FIELDS, simulation_id=3, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
        client.close(bye=False)
    assert never(endpoint) in caplog.text, caplog.text


@pytest.mark.timeout(30)
def test_a_close_that_gave_up_on_a_disconnected_receiver_says_it_too() -> None:
    endpoint = refused_endpoint()
    tuning = ClientTuning(close_timeout=60, disconnected_timeout=0.2)
    client = Client(FIELDS, simulation_id=4, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with pytest.raises(TimeoutError) as caught:
        client.close()
    said = str(caught.value)
    assert f"to {endpoint}: the receiver is unreachable, tried for " in said, said
    assert said.endswith(f"(disconnected_timeout=0.2 s): {never(endpoint)}"), said
    assert "died" not in said and "reconnect" not in said, said  # (it never connected)


@pytest.mark.timeout(30)
def test_a_receiver_that_accepted_the_connection_is_not_said_never_connected(
    paused: socket.socket,
) -> None:
    endpoint = f"tcp://127.0.0.1:{paused.getsockname()[1]}"
    client = Client(
        FIELDS, simulation_id=5, endpoints=endpoint, tuning=ClientTuning(close_timeout=0.5)
    )
    client.send(0, u=np.ones(4, np.float32))
    paused.settimeout(20)
    accepted, _ = paused.accept()  # (the client connected: the close comes after)
    with accepted, pytest.raises(TimeoutError) as caught:
        client.close()
    said = str(caught.value)
    assert "not delivered within close_timeout=0.5 s" in said, said
    assert "ever accepted" not in said, said


@pytest.mark.timeout(30)
def test_a_blocked_send_says_it() -> None:
    """One message may queue (``sndhwm=1``): a later send blocks, and gives up once the
    receiver has been disconnected for ``disconnected_timeout`` (`send_wait`)."""
    endpoint = refused_endpoint()
    tuning = ClientTuning(sndhwm=1, batch_bytes=0, disconnected_timeout=0.2, close_timeout=0.2)
    client = Client(FIELDS, simulation_id=6, endpoints=endpoint, tuning=tuning)
    try:
        with pytest.raises(TimeoutError) as caught:
            for step in range(100):
                client.send(step, u=np.ones(4, np.float32))
    finally:
        client.close(bye=False)
    said = str(caught.value)
    assert said.startswith("simulation 6 rank 0: could not send time step "), said
    assert f"(disconnected_timeout=0.2 s): {never(endpoint)}" in said, said
    assert "died" not in said and "reconnect" not in said, said


@pytest.mark.timeout(30)
def test_the_notice_says_connect_not_reconnect(caplog: pytest.LogCaptureFixture) -> None:
    """The close's notice (said once `notice_after` s in) of a receiver never connected
    says only that: before, it waited "for it to reconnect"."""
    endpoint = refused_endpoint()
    tuning = ClientTuning(close_timeout=60, disconnected_timeout=1.0)
    client = Client(FIELDS, simulation_id=9, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with (
        caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"),
        pytest.raises(TimeoutError, match="no receiver ever accepted a connection"),
    ):
        client.close()
    notices = [r.getMessage() for r in caplog.records if "The close waits" in r.getMessage()]
    assert len(notices) == 1, caplog.text
    assert "for it to connect (" in notices[0], notices[0]
    assert "died" not in notices[0] and "reconnect" not in notices[0], notices[0]
