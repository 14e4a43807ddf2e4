"""A serving endpoint whose host name does not resolve is a ValueError at once naming
the endpoint and the name (a typo, a misconfiguration), not "refused the connection:
nothing listens there (the trainer is gone or restarting)", a `PredictionUnavailable`
a solver falls back from silently at every request (user trial htrial7 F4).

``.invalid`` never resolves (RFC 6761). A closed port on a literal address is still a
trainer gone (`PredictTimeout`, at once)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import PredictionUnavailable, Predictor, PredictTimeout
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY

LONG = 60.0  # longer than the tests' timeouts: a request that waits for it fails
INPUTS = {"q": np.zeros(4, np.float32)}


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.mark.timeout(30)
def test_a_host_name_that_does_not_resolve_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = "tcp://no-such-host.invalid:5000"
    monkeypatch.setenv(ENV_SERVE_ENDPOINTS, endpoint)
    with Predictor(0) as predictor:
        for _ in range(2):
            with pytest.raises(ValueError) as error:
                predictor.predict(INPUTS, timeout=LONG)
            text = str(error.value)
            assert endpoint in text and "'no-such-host.invalid' does not resolve" in text, text
            assert not isinstance(error.value, PredictionUnavailable)


@pytest.mark.timeout(30)
def test_a_closed_port_of_a_resolving_host_is_still_a_trainer_gone() -> None:
    with socket.socket() as probe:  # a port nothing listens on (bound, not listening)
        probe.bind(("127.0.0.1", 0))
        endpoint = f"tcp://localhost:{probe.getsockname()[1]}"
        with Predictor(0, endpoint=endpoint) as predictor, pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=LONG)
    assert "refused the connection" in str(error.value), error.value
