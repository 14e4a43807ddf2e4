"""The receivers' endpoints are checked for their form before the Python client
connects (client/endpoint_form.py, client/config.py ``resolve_receivers``), as the C
client checks them (tests/c/test_c_endpoints_parity.py runs both; this file needs no
compiler). Before: ``'"tcp://h:5"'`` (a shell's quotes left in the value) got ZeroMQ's
"Protocol not supported", ``tcp://h:55x`` connected to port 55, ``tcp://h:0`` and
``tcp://*:5`` were taken, and the variable was not named in "endpoints must be like"."""

from __future__ import annotations

import pytest

from melissa_trainer.client.config import resolve_receivers
from melissa_trainer.client.endpoint_form import RECEIVER_FORM, endpoint_fault

pytestmark = pytest.mark.timeout(30)

QUOTED = (
    "has a quote mark at its start or end (a shell's or a batch script's quoting left in the value)"
)


@pytest.mark.parametrize(
    ("endpoint", "what"),
    [
        ('"tcp://h:5"', QUOTED),
        ("'tcp://h:5'", QUOTED),
        ('tcp://h:5"', QUOTED),
        ("tcp://h:0", "has a port that is not a number 1 to 65535"),
        ("tcp://h:55x", "has a port that is not a number 1 to 65535"),
        ("tcp://h:*", "has a port that is not a number 1 to 65535"),
        ("tcp://*:5", "has a host * (a bind's, not a connection's)"),
        ("tcp://h", "has no port"),
    ],
)
def test_a_bad_form_is_named(endpoint: str, what: str) -> None:
    assert (
        endpoint_fault(endpoint, RECEIVER_FORM) == f"endpoint {endpoint!r} {what}: {RECEIVER_FORM}"
    )


@pytest.mark.parametrize(
    "endpoint", ["tcp://h:05555", "tcp://h:000009", "tcp://[::1]:9", "ipc:///x"]
)
def test_a_good_form_passes(endpoint: str) -> None:
    assert endpoint_fault(endpoint, RECEIVER_FORM) is None


def test_the_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MELISSA_TRAINER_KEY", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", '\xa0"tcp://h:5"\x1c')  # (str.strip)
    with pytest.raises(ValueError) as error:
        resolve_receivers(None, 1.0)
    assert str(error.value) == (
        "MELISSA_TRAINER_ENDPOINTS: endpoint '\"tcp://h:5\"' has a quote mark at its start or "
        f"end (a shell's or a batch script's quoting left in the value): {RECEIVER_FORM}"
    )
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", "h:5")
    with pytest.raises(ValueError, match="^MELISSA_TRAINER_ENDPOINTS: endpoints must be like"):
        resolve_receivers(None, 1.0)
    with pytest.raises(ValueError, match="^endpoints must be like"):  # (the argument: no name)
        resolve_receivers("h:5", 1.0)
