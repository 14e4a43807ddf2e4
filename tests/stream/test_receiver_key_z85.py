"""A receiver's (and a serving socket's) CURVE keys are checked as Z85, as the clients'
keys are now (`client.server_key.z85_fault`, ae487991/d9eb93cd), not for their length
only (`stream.receiver_address.curve_keys`, which `ReceiverConfig` calls).

Before, a 40-character `curve_secret_key` outside Z85 (or whose 5-character groups
overflow a 32-bit word) raised libzmq's bare ``ZMQError: Invalid argument``, naming
neither the field nor the fix; a non-ASCII one a ``UnicodeEncodeError``; and such a
`curve_public_key` was taken, to be logged and published in the rendezvous files, where
every client then refused it as not a Z85 key. Now a ValueError naming the field, never
its value (the secret is not echoed). Failed before (4 of 4)."""

from __future__ import annotations

import pytest
import zmq

from melissa_trainer import ReceiverConfig

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq without CURVE")

#: 40 characters each: groups over 2**32 ('#' is 84), one outside Z85, one not ASCII
NOT_Z85 = ["#" * 40, 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"', "é" + "x" * 39]
BEGINNING = "CURVE keys must be 40-character Z85 strings (zmq.curve_keypair()): "


@pytest.mark.timeout(30)
@pytest.mark.parametrize("secret", NOT_Z85)
def test_a_secret_key_that_is_not_z85_is_a_value_error_naming_the_field(secret: str) -> None:
    with pytest.raises(ValueError) as caught:
        ReceiverConfig(curve_secret_key=secret)
    said = str(caught.value)
    assert said == f"{BEGINNING}curve_secret_key is not one", said
    assert secret not in said  # (a secret is never echoed)


@pytest.mark.timeout(30)
def test_a_public_key_that_is_not_z85_is_refused_not_published() -> None:
    public, secret = zmq.curve_keypair()
    ReceiverConfig(curve_secret_key=secret, curve_public_key=public)  # (the guard)
    for bad in NOT_Z85:
        with pytest.raises(ValueError) as caught:
            ReceiverConfig(curve_secret_key=secret, curve_public_key=bad)
        assert str(caught.value) == f"{BEGINNING}curve_public_key is not one", caught.value


@pytest.mark.timeout(30)
def test_a_public_key_not_of_the_secret_key_is_refused_not_published() -> None:
    """A Z85 `curve_public_key` of another key pair was taken, logged and published in
    the rendezvous files, and every client then failed its CURVE handshake (the server
    answers with its secret key's pair). Failed before: DID NOT RAISE."""
    _, secret = zmq.curve_keypair()
    other, _ = zmq.curve_keypair()
    with pytest.raises(ValueError) as caught:
        ReceiverConfig(curve_secret_key=secret, curve_public_key=other)
    said = str(caught.value)
    assert "curve_public_key is not the public key of curve_secret_key" in said, said
    assert secret.decode() not in said and other.decode() not in said
