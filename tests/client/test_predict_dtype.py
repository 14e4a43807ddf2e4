"""Inputs of the declared shape but another dtype (float64 for a float32 input) sent
to endpoints given without a rendezvous (the inputs not known here): the trainer's
refusal leads with the dtype and says to cast, not "too_large: arrays of more than 16
bytes (array 'q' is <f8 (4,)); the trainer serves 'q' <f4 (4,)" (user trial htrial7 F9:
the fix is a cast, not a smaller array). The reason stays ``too_large`` (its count).

A real `PredictServer` (its I/O thread refuses a request that is not its inputs). Since
DESCRIBE (user trial 32) the client asks the trainer for its inputs and checks the
request itself, in the same words, sending nothing (the trainer's refusal, for a client
that sends anyway: tests/stream)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving import PredictServer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PredictServer]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    srv = PredictServer({"q": ((4,), "float32")}, bind="tcp://127.0.0.1:*")
    srv.start()
    srv.serving = True
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "said"),
    [
        (np.zeros(4, np.float64), "input 'q' is <f8 (4,), declared <f4 (4,) (cast it"),
        (np.zeros(8, np.float32), "input 'q' is <f4 (8,), declared <f4 (4,)"),
        (  # PyTorch's habit, u[None] (user trial htrial4): before, no word on the fix
            np.zeros((1, 4), np.float32),
            "input 'q' is <f4 (1, 4), declared <f4 (4,) (a request is one sample, without a "
            "batch dimension: drop the leading 1, one request per sample)",
        ),
    ],
    ids=["float64", "longer", "batched"],
)
def test_inputs_of_another_dtype_are_refused_naming_the_dtype_first(
    server: PredictServer, value: np.ndarray, said: str
) -> None:
    assert server.endpoint is not None
    with Predictor(0, endpoint=server.endpoint) as predictor, pytest.raises(ValueError) as error:
        predictor.predict({"q": value}, timeout=20.0)
    text = str(error.value)
    assert text.startswith(f"predict(): {said}"), text
    assert server.telemetry() == {"described": 1}  # (the request itself not sent)
