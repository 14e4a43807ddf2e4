"""Inputs that are not a mapping (an array passed bare, a list of pairs) are a mistake in
the call: `Predictor.predict` says so, a TypeError naming the fix, whatever the trainer's
state. Found in a user trial (hserve): ``predict(u)`` raised AttributeError
"'numpy.ndarray' object has no attribute 'items'" while the trainer served, and the
fallback's `PredictTimeout` ("refused the connection") while it was gone, so a solver
catching `PredictionUnavailable` fell back silently on every request.

Real sockets: a real `PredictServer` serving (nothing sent: its telemetry stays empty),
and a serve file whose port refuses connections (a trainer gone). Each request's timeout
(20 s) is long: a request that waited for it fails the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melissa_trainer import wire as protocol
from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import write_serving

pytestmark = pytest.mark.timeout(30)

_U = np.zeros(4, np.float32)
BAD: list[Any] = [_U, [("q", _U)], None]
IDS = ["array", "pairs", "None"]


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    yield


def _said(error: pytest.ExceptionInfo[TypeError], bad: Any) -> None:
    text = str(error.value)
    lead = "predict(): inputs must be a mapping of input names to arrays, not "
    assert text.startswith(lead), text
    assert type(bad).__name__ in text and "{'name': array}" in text, text


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_serving_trainer_is_sent_nothing_and_the_call_is_named(bad: Any) -> None:
    srv = PredictServer({"q": ((4,), "float32")}, bind="tcp://127.0.0.1:*")
    srv.start()
    srv.serving = True
    try:
        assert srv.endpoint is not None
        with Predictor(0, endpoint=srv.endpoint) as predictor:
            with pytest.raises(TypeError) as error:
                predictor.predict(bad, timeout=20.0)
            _said(error, bad)
        assert srv.telemetry().get("requests", 0) == 0, srv.telemetry()  # nothing sent
    finally:
        srv.stop()


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_trainer_gone_does_not_hide_the_mistake_as_a_fallback(bad: Any, tmp_path: Path) -> None:
    specs = protocol.field_specs({"q": ((4,), "float32")})
    # (a serve file left by a trainer killed: nothing listens at port 1, refused at once)
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    with Predictor(0, rendezvous_dir=tmp_path) as predictor:
        with pytest.raises(TypeError) as error:  # the first request
            predictor.predict(bad, timeout=20.0)
        _said(error, bad)
        with pytest.raises(Exception) as fallback:  # the right call: the fallback
            predictor.predict({"q": _U}, timeout=20.0)
        assert type(fallback.value).__name__ == "PredictTimeout", fallback.value
        # in the backoff after that refusal (before: PredictTimeout, a silent fallback)
        with pytest.raises(TypeError) as error:
            predictor.predict(bad, timeout=20.0)
        _said(error, bad)
