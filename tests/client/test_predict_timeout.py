"""`Predictor.predict`'s timeout at its edges, against a real serving socket (an
in-process `PredictServer`, a real ZeroMQ connection).

A simulation that would rather wait for its prediction than fall back gives a long
timeout. `float("inf")` used to raise OverflowError, and any timeout over 2^32 - 1
milliseconds (49.7 days) `struct.error`, from the encoding of the request, and, past
2^31 - 1 milliseconds, OverflowError from the socket's poll: neither a
`PredictionUnavailable` the simulation falls back from nor the ValueError of a bad
argument. Now infinity (and NaN) is a ValueError naming the timeout, and a long finite
timeout is sent as the wire's largest (as the C client does), polled in parts, and
answered; so is the largest finite float, whose milliseconds overflowed.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Predictor
from melissa_trainer.stream.serving import PredictServer

U32_MAX = 2**32 - 1


@pytest.fixture
def server() -> Iterator[tuple[PredictServer, list[int]]]:
    """A serving socket that answers y = u + 1 and records each request's timeout_ms."""
    srv = PredictServer({"u": ((2,), "float32")})
    srv.start()
    srv.serving = True
    seen: list[int] = []
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            if srv.wait_pending(0.05):
                for p in srv.take(8):
                    seen.append(p.request.timeout_ms)
                    srv.answer(p, {"y": p.request.arrays["u"] + 1}, 3)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    yield srv, seen
    stop.set()
    thread.join(10)
    srv.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "timeout",
    [1e9, 86400.0 * 60, 1e306, sys.float_info.max],
    # (the last two: finite, but their milliseconds are not; OverflowError "cannot
    # convert float infinity to integer" from the wire's rounding and the poll's bound
    # until a user's trial, 2026-12-05)
    ids=["1e9-s", "60-days", "1e306-s", "float-max"],
)
def test_a_timeout_longer_than_the_wire_carries_is_sent_as_its_largest(
    server: tuple[PredictServer, list[int]], timeout: float
) -> None:
    srv, seen = server
    with Predictor(0, endpoint=srv.endpoint) as client:
        outputs, version = client.predict({"u": np.array([1, 2], np.float32)}, timeout=timeout)
    assert version == 3 and outputs["y"].tolist() == [2.0, 3.0]
    assert seen == [U32_MAX]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", [math.inf, math.nan, 0, -1.0, None])
def test_a_timeout_that_is_not_a_finite_positive_number_is_a_value_error(
    server: tuple[PredictServer, list[int]], timeout: object
) -> None:
    srv, seen = server
    with (
        Predictor(0, endpoint=srv.endpoint) as client,
        pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"),
    ):
        client.predict({"u": np.zeros(2, np.float32)}, timeout=timeout)  # type: ignore[arg-type]
    assert seen == []  # nothing was sent
