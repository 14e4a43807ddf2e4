"""A close with a BYE (``close()``) gives up on a peer that is not a receiver once that
is known (it ended every ZeroMQ handshake), not at `close_timeout`; a silent peer (TCP
accepted, nothing said) is waited for: it may be a stopped trainer. (A user trial,
htrial19 wrongport: a client pointed at ``python -m http.server``; its close took its
whole 60 s close_timeout, and its ValueError led with "it takes CURVE (encrypted)
connections only ... set MELISSA_TRAINER_KEY", only then "or it is not a
melissa-trainer receiver".) A peer that ended every ZeroMQ handshake is said to be not a
receiver (check the endpoint), first; the CURVE advice follows it, since a CURVE-only
receiver's refusal of a client without a key (a mechanism mismatch, ZeroMQ's
HANDSHAKE_FAILED_PROTOCOL: that advice alone, tests/client/test_refused_handshake.py)
can lose its detail on the way (`NOT_RECEIVER_DROPS`).

Real sockets on 127.0.0.1; `NOT_ZMQ_AFTER` shortened so the tests are quick."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest
from test_not_a_receiver import http  # noqa: F401 (a fixture: the peer answering HTTP)

from melissa_trainer.client import Client, ClientTuning, handshake

pytestmark = pytest.mark.timeout(120)

FIELDS = {"u": ((4,), "float32")}
#: far beyond the tests' timeout (120 s): a close that waits for it (before the change)
#: fails by the timeout marker; the words say it gave up on a peer not a receiver
CLOSE_TIMEOUT = 3600.0


@pytest.fixture(autouse=True)
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.3)


@pytest.fixture
def silent() -> Iterator[str]:
    """A program that accepts TCP connections and never speaks ZeroMQ (nor anything),
    as ``python -m http.server`` to a ZeroMQ greeting (it waits for a line)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("peer", ["http"])
def test_a_close_gives_up_on_a_peer_not_a_receiver_and_says_check_the_endpoint(
    peer: str, request: pytest.FixtureRequest
) -> None:
    endpoint = str(request.getfixturevalue(peer))
    tuning = ClientTuning(close_timeout=CLOSE_TIMEOUT)
    client = Client(FIELDS, simulation_id=9, endpoints=endpoint, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with pytest.raises(ValueError) as caught:
        client.close()
    said = str(caught.value)
    assert said.startswith(f"simulation 9 rank 0: queued messages not delivered to {endpoint}: ")
    assert "not a melissa-trainer receiver" in said and "check the endpoint" in said, said
    # (the endpoint first)
    assert said.index("check the endpoint") < said.index("MELISSA_TRAINER_KEY"), said
    assert "died" not in said and "run it again" not in said, said


def test_a_close_waits_for_a_silent_peer_until_close_timeout(silent: str) -> None:
    """A peer that accepts TCP and says nothing may be a receiver whose trainer is stopped
    (SIGSTOP, a suspended job: tests/launcher/test_pause.py, which a close giving up on
    silence after NOT_ZMQ_AFTER failed in CI): it is waited for, until close_timeout,
    and the words say what it may be."""
    client = Client(
        FIELDS, simulation_id=8, endpoints=silent, tuning=ClientTuning(close_timeout=1.5)
    )
    client.send(0, u=np.ones(4, np.float32))
    started = time.monotonic()
    with pytest.raises(TimeoutError) as caught:
        client.close()
    # (waited: not given up on silence; its words say so below. A lower bound on the
    # close's own deadline, set on the monotonic clock after `started`: deterministic
    # under load; 0.1 s below close_timeout for ZeroMQ's whole-ms poll timeouts)
    assert time.monotonic() - started >= 1.4
    said = str(caught.value)
    assert "not delivered within close_timeout=1.5 s" in said, said
    assert "CURVE" not in said and "MELISSA_TRAINER_KEY" not in said, said
