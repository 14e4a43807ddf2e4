"""A request whose timeout is shorter than a connection takes, to a trainer that serves.

With `timeout=1e-4` no connection to a live serving socket is made in time (not even
begun), at every request. The `PredictTimeout` said "(the trainer is gone or
restarting)" alone: a user with a live trainer was told it was gone (user trial 39).
It now says the other cause too, the timeout, and the fix (`predict_errors.TOO_SHORT`).
A timeout that connects is answered by the same socket.

Real parts: the trainer's serving socket (`PredictServer`, answered by a thread), the
`Predictor`.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from melissa_trainer.client import PredictionUnavailable, Predictor, PredictTimeout
from melissa_trainer.client.predict_errors import TOO_SHORT
from melissa_trainer.stream.serving import PredictServer


@pytest.mark.timeout(60)
def test_a_timeout_too_short_to_connect_says_so_not_only_trainer_gone() -> None:
    server = PredictServer({"u": ((4,), "float32")})
    server.start()
    server.serving = True
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            if server.wait_pending(0.05):
                for p in server.take(8):
                    server.answer(p, {"y": p.request.arrays["u"] + 1}, 3)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    u = np.zeros(4, np.float32)
    try:
        with Predictor(0, endpoint=server.endpoint) as predictor:
            with pytest.raises(PredictTimeout) as caught:
                predictor.predict({"u": u}, timeout=1e-4)
            assert str(caught.value) == (
                "no connection to the trainer's serving endpoint within 0.0001 s "
                f"(the trainer is gone or restarting; {TOO_SHORT})"
            )
            assert "timeout shorter than a connection takes" in TOO_SHORT
            outputs, deadline = None, time.monotonic() + 30
            while outputs is None and time.monotonic() < deadline:  # (a backoff: at once)
                try:
                    outputs, version = predictor.predict({"u": u}, timeout=5.0)
                except PredictionUnavailable:
                    continue  # (the backoff after the first failure: at once, no dial)
            assert outputs is not None and version == 3
            np.testing.assert_array_equal(outputs["y"], u + 1)
    finally:
        stop.set()
        thread.join(10)
        server.stop()
