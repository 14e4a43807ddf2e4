"""`MELISSA_TRAINER_KEY` was checked for its length only: a 40-character key with a
character outside the Z85 alphabet reached libzmq, which raised a bare "Invalid
argument" at the socket option, naming neither the variable nor the fix; and one whose
5-character groups overflow a 32-bit word was taken as some other key (a handshake
refused later, as a key that does not match). Now checked as `Client(curve_server_key=
...)` is (`server_key.z85_fault`), with the message's beginning kept
(tests/client/test_endpoints_key.py, tests/c/test_c_stream_key.py). Failed before (no
ValueError: zmq's error, or none)."""

from __future__ import annotations

import pytest
import zmq

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.config import ENV_KEY

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq without CURVE")

#: 40 characters, each a key's wrong: one outside Z85 ('"'), and groups over 2**32 ('#' is 84)
OUTSIDE = 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"'
OVERFLOW = "#" * 40
BEGINNING = f"the receivers' CURVE key ({ENV_KEY}) must be the 40-character Z85 public key, not "


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("key", "fault"),
    [
        (OUTSIDE, "Z85 characters only, not '\"'"),
        (OVERFLOW, "Z85 (each 5 characters encode a 32-bit word)"),
        ("not-a-key", "40 characters, not 9"),
    ],
)
def test_an_env_key_that_is_not_z85_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, key: str, fault: str
) -> None:
    monkeypatch.setenv(ENV_KEY, f" {key} ")  # (stripped)
    with pytest.raises(ValueError) as error:
        Client({"u": ((1,), "uint8")}, simulation_id=4, endpoints="tcp://127.0.0.1:9")
    assert str(error.value) == (
        f"{BEGINNING}{key!r} (it must be {fault}): the trainer's curve_public_key, as its "
        "rendezvous files publish it (rank_N.json); or unset it for receivers without CURVE"
    )


@pytest.mark.timeout(60)
def test_a_z85_env_key_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())
    # (a close after a failure right after the client connected may not have seen the
    # refusal of port 9 yet, and then waits the whole failed_close_timeout: 10 s by
    # default, as it did in the suite under load)
    quick = ClientTuning(failed_close_timeout=0.5)
    client = Client(
        {"u": ((1,), "uint8")}, simulation_id=4, endpoints="tcp://127.0.0.1:9", tuning=quick
    )
    client.close(bye=False)
