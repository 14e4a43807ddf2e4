"""`MELISSA_TRAINER_KEY`: the receivers' CURVE public key for a client told its
endpoints by `MELISSA_TRAINER_ENDPOINTS` (or ``endpoints=``), as
`MELISSA_TRAINER_SERVE_KEY` is for `MELISSA_TRAINER_SERVE_ENDPOINTS`. The oracle: a
PULL socket that is a CURVE server receives nothing but from a client holding its public
key (the handshake fails otherwise), and decodes what it receives with the wire codec."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import curve_pull_server

from melissa_trainer import wire as p
from melissa_trainer.client import ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[zmq.Socket, str, str]]:
    """A CURVE PULL server on loopback: the socket, its endpoint and its public key."""
    for name in (ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, "MELISSA_TRAINER_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    with curve_pull_server() as server:
        yield server


def first_message(sock: zmq.Socket, timeout: float = 10.0) -> p.Message:
    assert sock.poll(int(timeout * 1000)), "nothing received"
    frames = sock.recv_multipart()
    return p.decode(frames[0], frames[1] if len(frames) > 1 else None)


@pytest.mark.timeout(60)
def test_endpoints_of_the_environment_take_the_key_of_the_environment(
    server: tuple[zmq.Socket, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, endpoint, public = server
    monkeypatch.setenv(ENV_ENDPOINTS, endpoint)
    monkeypatch.setenv(ENV_KEY, f" {public}\n")  # (stripped, as the endpoints are)
    tuning = ClientTuning(close_timeout=10)  # (without the key: undelivered, TimeoutError)
    with Client({"u": ((1,), "uint8")}, simulation_id=4, tuning=tuning) as client:
        client.send(0, u=np.array([7], np.uint8))
    hello = first_message(sock)
    assert isinstance(hello, p.Hello) and hello.simulation_id == 4


@pytest.mark.timeout(60)
def test_without_the_key_a_curve_receiver_hears_nothing(
    server: tuple[zmq.Socket, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counterpart: the same client without the key never passes the handshake (what
    a client told its endpoints by the environment got before the variable existed)."""
    sock, endpoint, _ = server
    monkeypatch.setenv(ENV_ENDPOINTS, endpoint)
    client = Client({"u": ((1,), "uint8")}, simulation_id=4, tuning=ClientTuning(close_timeout=0.5))
    try:
        try:
            client.send(0, u=np.array([7], np.uint8))
        except ValueError as exc:  # (a send that waited long enough to hear the refusal:
            assert "refused this client's handshake" in str(exc)  # a loaded machine's)
        assert sock.poll(500) == 0
    finally:
        with contextlib.suppress(TimeoutError, ValueError):  # (undelivered: dropped, or
            client.close(bye=False)  # the refused handshake said at close)


@pytest.mark.timeout(60)
def test_a_malformed_key_is_refused_before_anything_is_sent(
    server: tuple[zmq.Socket, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, endpoint, _ = server
    monkeypatch.setenv(ENV_KEY, "not-a-key")
    with pytest.raises(ValueError, match=r"\(MELISSA_TRAINER_KEY\) must be the 40-character"):
        Client({"u": ((1,), "uint8")}, simulation_id=4, endpoints=endpoint)


@pytest.mark.timeout(60)
def test_a_rendezvous_keeps_its_own_key(
    server: tuple[zmq.Socket, str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As `MELISSA_TRAINER_SERVE_KEY` with a serve file: the variable is not read when
    the endpoints come from a rendezvous, which publishes its key."""
    sock, endpoint, public = server
    write_rendezvous(tmp_path, 0, 1, endpoint, {"curve_public_key": public})
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    monkeypatch.setenv(ENV_KEY, "not-a-key")
    with Client({"u": ((1,), "uint8")}, simulation_id=5) as client:
        client.send(0, u=np.array([7], np.uint8))
    hello = first_message(sock)
    assert isinstance(hello, p.Hello) and hello.simulation_id == 5
