"""A `Predictor` given an endpoint that answers but is not a serving socket (the stream
receiver's ``endpoint`` of ``rendezvous/rank_0.json`` instead of ``serve_0.json``'s, an
easy confusion: both files have an ``endpoint`` key) fails at once with a ValueError
naming the endpoint and the fix, as a refused CURVE handshake does.

Found in a user trial (htrial7 F3): every request waited its whole timeout and said
"no connection to the trainer's serving endpoint within 1.0 s (the trainer is gone or
restarting)" while the trainer was alive. ZeroMQ closes such a connection at the
handshake (the socket types do not match) and, a protocol error, never dials again: the
monitor says DISCONNECTED and nothing more, where a trainer that dies mid-handshake is
dialled again (CONNECT_RETRIED).

Real sockets: a real `Receiver` (its PULL socket), the requests' timeout (60 s) longer
than the test's (30 s): a request that waits for its timeout fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import running

from melissa_trainer.client import PredictionUnavailable, Predictor, PredictTimeout, predict_link
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 60.0
INPUTS = {"q": np.zeros(4, np.float32)}


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_the_receivers_endpoint_is_an_error_at_once_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # each request waits out the redial bound before it says so: ZeroMQ never dials a
    # PULL again, so a short bound decides the same, sooner (5 requests of 0.5 s before)
    monkeypatch.setattr(predict_link, "_NO_REDIAL", 0.1)
    with running(expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        if how == "environment":
            monkeypatch.setenv(ENV_SERVE_ENDPOINTS, receiver.endpoint)
        given = receiver.endpoint if how == "argument" else None
        with Predictor(0, endpoint=given) as predictor:
            # every request: a mistake to fix, never a fallback (ZeroMQ's two ways of
            # saying it race: the client sees the mismatch, or the server closes first)
            for _ in range(5):
                with pytest.raises(ValueError) as error:
                    predictor.predict(INPUTS, timeout=LONG)
                text = str(error.value)
                assert receiver.endpoint in text, text
                assert "is not a serving socket" in text and "serve_" in text, text
                if how == "environment":
                    assert "serve_0.json" in text, text
                assert not isinstance(error.value, PredictionUnavailable)


@pytest.mark.timeout(30)
def test_a_serve_file_naming_a_receiver_falls_back_at_once(tmp_path: Path) -> None:
    """A serve file read from the rendezvous may be a stale one whose port another
    socket took since: the trainer is not there (a fallback, looked up again), said
    at once, not at the timeout."""
    with running(expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        rv = tmp_path / "rv"
        write_serving(
            rv, 0, 1, receiver.endpoint, field_specs({"q": ((4,), "float32")}), None, None
        )
        with Predictor(0, rendezvous_dir=rv) as predictor, pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=LONG)
        assert "is not a serving socket" in str(error.value), error.value


@pytest.mark.timeout(30)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_a_curve_receivers_endpoint_with_its_key_names_the_serve_file_too() -> None:
    """With CURVE, ZeroMQ reports the closed handshake as a refusal without detail,
    the same as a wrong key: the error says both."""
    with running(curve_secret_key=zmq.curve_keypair()[1], expected_simulations=1) as receiver:
        assert receiver.endpoint is not None and receiver.curve_public_key is not None
        with (
            Predictor(
                0, endpoint=receiver.endpoint, curve_server_key=receiver.curve_public_key
            ) as predictor,
            pytest.raises(ValueError) as error,
        ):
            predictor.predict(INPUTS, timeout=LONG)
        text = str(error.value)
        assert receiver.endpoint in text and "serve_{rank}.json" in text, text
