"""A serving endpoint given to a `Predictor` is checked for its form, in the C client's
words (client/endpoint_form.py, clients/c/src/serve_given.c ``mt_endpoint_fault``):
``Predictor(0, endpoint="tcp://127.0.0.1")`` (no port) raised libzmq's bare "Invalid
argument" at the first request, where the C client says "has no port". Now: at
construction for the argument, at the first request for
``$MELISSA_TRAINER_SERVE_ENDPOINTS``, naming where it was given and the form to give.
No trainer, nothing listens: every case fails before any connection."""

from __future__ import annotations

import numpy as np
import pytest

from melissa_trainer.client.predict import Predictor

pytestmark = pytest.mark.timeout(60)

FORM = "give tcp://HOST:PORT (the trainer's serve_N.json)"

BAD = {
    "tcp://127.0.0.1": f"endpoint 'tcp://127.0.0.1' has no port: {FORM}",
    "tcp://127.0.0.1:": f"endpoint 'tcp://127.0.0.1:' has no port: {FORM}",
    "tcp://[::1]": f"endpoint 'tcp://[::1]' has no port: {FORM}",
    "tcp://:5555": f"endpoint 'tcp://:5555' has no host: {FORM}",
    "tcp://": f"endpoint 'tcp://' has no host and no port: {FORM}",
    "tcp://host:55x": f"endpoint 'tcp://host:55x' has a port that is not a number 1 to 65535: "
    f"{FORM}",
    "tcp://host:70000": f"endpoint 'tcp://host:70000' has a port that is not a number 1 to "
    f"65535: {FORM}",
    "tcp://host:*": f"endpoint 'tcp://host:*' has a port that is not a number 1 to 65535: {FORM}",
    "tcp://*:5555": f"endpoint 'tcp://*:5555' has a host * (a bind's, not a connection's): {FORM}",
    "ipc://": "endpoint 'ipc://' has no path: give ipc://PATH",
    "localhost:5555": f"endpoint 'localhost:5555' is not like tcp://HOST:PORT: {FORM}",
}


@pytest.mark.parametrize("endpoint", sorted(BAD))
def test_a_malformed_endpoint_argument_is_refused_at_construction(endpoint: str) -> None:
    with pytest.raises(ValueError) as info:
        Predictor(0, endpoint=endpoint).close()
    assert str(info.value) == f"Predictor(endpoint=...): {BAD[endpoint]}"


@pytest.mark.parametrize("endpoint", ["tcp://127.0.0.1", "tcp://:5555"])
def test_a_malformed_endpoint_of_the_variable_is_said_at_the_request(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_SERVE_ENDPOINTS", f"tcp://127.0.0.1:9, {endpoint}")
    predictor = Predictor(1)  # (id 1: the second endpoint listed)
    try:
        with pytest.raises(ValueError) as info:
            predictor.predict({"u": np.zeros(2, np.float32)}, timeout=20.0)
    finally:
        predictor.close()
    assert str(info.value) == f"MELISSA_TRAINER_SERVE_ENDPOINTS: {BAD[endpoint]}"


@pytest.mark.parametrize(
    "endpoint", ["tcp://127.0.0.1:9", "tcp://[::1]:9", "tcp://127.0.0.1:0;localhost:9", "ipc:///x"]
)
def test_well_formed_endpoints_are_taken(endpoint: str) -> None:
    Predictor(0, endpoint=endpoint).close()
