"""A Python client pointed at an endpoint where another program listens (a user trial:
``python -m http.server 18777``, then a client at tcp://127.0.0.1:18777): TCP connects,
no ZeroMQ handshake ever completes. Before the change nothing was said during the wait,
and the close's error, after the whole close_timeout, said "run it again ... once its
trainer runs", never that the endpoint is wrong. Now a warning says it once, when first
seen (`Handshakes.not_receivers`: connected `NOT_ZMQ_AFTER` s without a handshake), and
the close's error says it instead of the trainer-died advice. A silent peer's close is a
`TimeoutError` at `close_timeout`, never sooner: a receiver whose trainer is stopped
(SIGSTOP) is as silent, and is waited for (tests/client/test_close_bye_not_a_receiver.py
::test_a_close_waits_for_a_silent_peer_until_close_timeout). A peer that answers with
HTTP and hangs up fails every handshake without detail: refused at once, as not a
receiver, check the endpoint; the CURVE advice comes after, as a CURVE-only receiver's
refusal of a client without a key can lose its detail (`NOT_RECEIVER_DROPS`).

Real sockets on 127.0.0.1; `NOT_ZMQ_AFTER` shortened so the tests are quick."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import numpy as np
import pytest
from http_peer import http_peer
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, handshake
from melissa_trainer.client.handshake_words import NOT_RECEIVER, NOT_RECEIVER_DROPS

FIELDS = {"u": ((4,), "float32")}


@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.3)


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A program that accepts TCP connections and never speaks ZeroMQ (nor anything)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener


@pytest.fixture
def http() -> Iterator[str]:
    """A program that answers every connection with HTTP junk and hangs up."""
    with http_peer(b"HTTP/1.0 400 Bad request\r\n\r\n<html>no</html>\n") as endpoint:
        yield endpoint


@pytest.mark.timeout(30)
def test_a_silent_peer_is_warned_of_once_and_the_error_says_check_the_endpoint(
    short: None, silent: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
    # (a close_timeout shorter than NOT_ZMQ_AFTER: the decision is waited for below, not
    # raced against the close's deadline. Before, close_timeout 2.0 s and either error
    # taken: every close was a TimeoutError after 2 s, the ValueError a dead branch)
    tuning = ClientTuning(close_timeout=0.1)
    client = Client(FIELDS, simulation_id=7, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    silent.settimeout(20)
    accepted, _ = silent.accept()  # (TCP connected: the close comes after)
    # (the close knows what the client knows: once the peer counts as no receiver, which
    # reads no warning out: `warn` is the waits' and the sends' look)
    wait_until(lambda: bool(client._transport.handshakes.not_receivers([endpoint])), "seen")
    with (
        accepted,
        caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"),
        pytest.raises(TimeoutError) as caught,  # (silence is waited for: not a refusal)
    ):
        client.close()
    said = str(caught.value)
    assert "not delivered within close_timeout=0.1 s" in said, said
    assert f"{endpoint}: {NOT_RECEIVER}" in said, said
    assert "died" not in said and "run it again" not in said, said
    warned = [r.getMessage() for r in caplog.records if NOT_RECEIVER in r.getMessage()]
    # (led by whose it is, as the C client's: before, it began "to ENDPOINT")
    expected = (
        f"simulation 7 rank 0: to {endpoint}: {NOT_RECEIVER}; nothing sent to it is delivered"
    )
    assert warned == [expected], warned


@pytest.mark.timeout(30)
def test_a_peer_answering_http_is_refused_as_not_a_receiver(http: str) -> None:
    tuning = ClientTuning(close_timeout=20)
    with (
        pytest.raises(ValueError) as caught,
        Client(FIELDS, simulation_id=8, endpoints=http, tuning=tuning) as client,
    ):
        client.send(0, u=np.ones(4, np.float32))
    said = str(caught.value)
    assert said.startswith(f"simulation 8 rank 0: queued messages not delivered to {http}:")
    assert said.endswith(f"{http}: {NOT_RECEIVER_DROPS}"), said
    # (the endpoint first; the CURVE advice after it, for a CURVE-only receiver whose
    # mechanism mismatch lost its detail: NOT_RECEIVER_DROPS)
    assert said.index("check the endpoint") < said.index("MELISSA_TRAINER_KEY"), said
    assert "died" not in said and "run it again" not in said, said
