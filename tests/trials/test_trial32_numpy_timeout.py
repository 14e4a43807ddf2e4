"""Severity LOW. User trial 32: a numpy float32 timeout is refused as "not a finite
number of seconds".

What a user did: ``client.predict({"u": u}, timeout=0.5 * dt)`` where ``dt`` came from the
solver's float32 state (a ``numpy.float32``), as a time step's budget.

What happened: ``ValueError: timeout must be a finite number of seconds > 0, not
np.float32(0.5)`` before anything was sent (the check took only ``int | float``; numpy's
float64 passes, being a ``float``, but float32 and the numpy integers do not).

Expected (docs/how-to/serve-while-training.md: "a finite number of seconds (`ValueError`
otherwise)"): any finite real number of seconds > 0 is a timeout; the answer comes.
Fixed (`numbers.Real`); before, the first test failed with that ValueError.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from predict_server import INPUTS, VERSION, answering_server

from melissa_trainer.client import Predictor

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("timeout", [np.float32(20.0), np.int64(20)], ids=["float32", "int64"])
def test_a_numpy_timeout_is_a_number_of_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: object
) -> None:
    for name in list(os.environ):
        if name.startswith("MELISSA_TRAINER_"):
            monkeypatch.delenv(name)
    assert INPUTS == {"u": ((4,), "float32")}
    with answering_server(tmp_path) as (server, _), Predictor(0, endpoint=server.endpoint) as p:
        outputs, version = p.predict({"u": np.ones(4, np.float32)}, timeout=timeout)  # type: ignore[arg-type]
    assert version == VERSION
    np.testing.assert_array_equal(outputs["y"], 2 * np.ones(4, np.float32) + VERSION)


def test_what_is_not_a_number_of_seconds_is_still_refused(tmp_path: Path) -> None:
    with Predictor(0, endpoint="tcp://127.0.0.1:9") as p:
        for bad in (np.float32("nan"), np.float32(0), np.float64("inf"), "1", None):
            with pytest.raises(ValueError, match="timeout must be a finite number of seconds"):
                p.predict({"u": np.ones(4, np.float32)}, timeout=bad)  # type: ignore[arg-type]
