"""``Client(curve_server_key=...)``: the stream's CURVE key as an argument (a user trial:
a scientist running solvers by hand could give it only by ``MELISSA_TRAINER_KEY`` or a
rendezvous). It takes precedence over the variable for endpoints given directly, is
checked before anything connects (a bad Z85 key: a `ConfigError` naming it and the
fix), and with a rendezvous must be the key its files publish (the running trainer's).

A real CURVE `Receiver` (real sockets, in this process); real rendezvous files. Each test
failed before (the argument did not exist: `UnknownArgumentError`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.stream.endpoints import write_rendezvous

FIELDS = {"u": ((4,), "float32")}
#: a close after a failure right after the client connected may not have seen the
#: refusal of port 9 yet, and then waits the whole failed_close_timeout (10 s by default;
#: in the suite, under load, it did)
QUICK_FAILED_CLOSE = ClientTuning(failed_close_timeout=0.5)


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(ENV_RENDEZVOUS, raising=False)
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_the_argument_wins_over_the_variable(
    by_hand: None, monkeypatch: pytest.MonkeyPatch, as_bytes: bool
) -> None:
    public, secret = zmq.curve_keypair()
    monkeypatch.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())  # (another trainer's)
    given = public if as_bytes else public.decode()  # (zmq.curve_keypair gives bytes)
    buffer = FIFOBuffer(16)
    with running(buffer=buffer, expected_simulations=1, curve_secret_key=secret) as receiver:
        assert receiver.curve_public_key == public.decode()
        tuning = ClientTuning(close_timeout=60.0)
        with Client(
            FIELDS, simulation_id=2, endpoints=receiver.endpoint, tuning=tuning,
            curve_server_key=given,
        ) as client:  # fmt: skip
            for t in range(3):
                client.send(t, u=np.full(4, t, np.float32))
        got = [int(s["time_step"]) for s in buffer.get_batch(3, timeout=30)]
    assert sorted(got) == [0, 1, 2]  # the oracle: it arrived (before: no such argument)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("bad", "wrong"),
    [
        ("x" * 39, "must be 40 characters, not 39"),
        ("#" * 40, "must be Z85 (each 5 characters encode a 32-bit word)"),
        ("é" + "x" * 39, "must be Z85 characters only, not 'é'"),
        (42, "must be a str (or bytes), not int"),
    ],
)
def test_a_bad_key_is_a_config_error_naming_it(by_hand: None, bad: object, wrong: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Client(FIELDS, simulation_id=1, endpoints="tcp://127.0.0.1:9", curve_server_key=bad)
    said = str(caught.value)
    assert said.startswith(f"curve_server_key={bad!r} {wrong}: "), said
    assert "curve_public_key in rank_N.json" in said and "zmq.curve_keypair()[0]" in said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("published", [True, False], ids=["another-key", "plain"])
def test_with_a_rendezvous_it_must_be_the_published_key(
    by_hand: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, published: bool
) -> None:
    theirs = zmq.curve_keypair()[0].decode()
    extra = {"curve_public_key": theirs} if published else {}
    write_rendezvous(tmp_path, 0, 1, "tcp://127.0.0.1:9", extra)
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    mine = zmq.curve_keypair()[0].decode()
    with pytest.raises(ConfigError) as caught:
        Client(FIELDS, simulation_id=1, curve_server_key=mine)
    said = str(caught.value)
    assert f"curve_server_key={mine!r} is not the key the rendezvous {tmp_path} publishes" in said
    assert (theirs if published else "None") in said and "drop curve_server_key=" in said, said


@pytest.mark.timeout(60)
def test_the_published_key_given_again_is_taken(
    by_hand: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # (the guard: the same key as the rendezvous' is no conflict; nothing listens there,
    # a close after a failure does not wait for it)
    theirs = zmq.curve_keypair()[0].decode()
    write_rendezvous(tmp_path, 0, 1, "tcp://127.0.0.1:9", {"curve_public_key": theirs})
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    client = Client(FIELDS, simulation_id=1, curve_server_key=theirs, tuning=QUICK_FAILED_CLOSE)
    client.close(bye=False)
