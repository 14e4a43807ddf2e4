"""Severity MEDIUM. User trial 32: a request over the serving socket's frame bound reads as
a trainer that died.

What a user did: a solver given the serving endpoint directly (`Predictor(endpoint=...)`,
or `MELISSA_TRAINER_SERVE_ENDPOINTS`: no serve file, so the inputs are not checked
before sending) sent numpy's default float64 for a float32 input of 1024 x 1024 (4 MiB
declared, 8 MiB sent).

What happened: the trainer's ROUTER has ``ZMQ_MAXMSGSIZE`` = the declared inputs' bytes +
1 MiB + 1 KiB, so libzmq closed the connection without a word (nothing in the trainer's
log, no counter), and the client raised `PredictTimeout` ("the connection to the
trainer's serving endpoint ... was lost while the request waited for its answer (the
trainer stopped or died)"): a `PredictionUnavailable`, which a solver falls back from on
every request, silently, for a mistake in its own code. The same request for a 16-float
input is refused ``too_large`` with "cast it to <f4" (a ValueError).

Expected (docs/how-to/serve-while-training.md, "Inputs that are not the trainer's" and
the troubleshooting row "numpy's float64 for a float32 input, endpoints given"): a
ValueError naming the input's dtype and the cast, whatever the request's size; not a
trainer said to be dead.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving import PredictServer

SHAPE = (1024, 1024)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PredictServer]:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    srv = PredictServer({"u": (SHAPE, "float32")}, bind="tcp://127.0.0.1:*")
    srv.start()
    srv.serving = True
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.timeout(60)
def test_a_float64_request_for_a_large_float32_input_is_a_value_error(
    server: PredictServer,
) -> None:
    assert server.endpoint is not None
    with Predictor(0, endpoint=server.endpoint) as predictor, pytest.raises(ValueError) as error:
        predictor.predict({"u": np.zeros(SHAPE)}, timeout=30.0)
    assert "<f8" in str(error.value) and "cast it" in str(error.value), str(error.value)
