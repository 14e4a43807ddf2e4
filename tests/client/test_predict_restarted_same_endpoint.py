"""A trainer restarted at the same serving endpoint (a fixed bind: ``ServingHook(bind=
'tcp://HOST:6000')``) with other inputs is asked with its inputs: the `Predictor`'s open
socket reconnects to it by itself, so the serve file is read again when a request's
inputs are not those read before and the rendezvous directory changed since (nothing
read while they match).

Found in a user trial (hserve2, 2026-12-06): every float64 request to the restarted
float64 trainer raised ValueError "input 'u' is <f8 (4,), declared <f4 (4,)", checked
against the first trainer's serve file, for ever. Failed before: that ValueError.

Real `PredictServer`s (a thread answers ``y = 2 u + VERSION``) on one held port, one
after the other; the requests between them fall back (`PredictTimeout`) until the
second serves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from held_ports import held_port
from predict_server import VERSION, serving_u

from melissa_trainer.client import Predictor, PredictTimeout

pytestmark = pytest.mark.timeout(60)

U = np.arange(4, dtype=np.float32)
LONG = 120.0  # (longer than the test's timeout: a request that waits for it fails)


def test_a_trainer_restarted_at_the_same_endpoint_with_other_inputs_is_asked_with_them(
    tmp_path: Path,
) -> None:
    rv, bind = tmp_path / "rv", f"tcp://127.0.0.1:{held_port()}"
    with Predictor(0, rendezvous_dir=rv) as client:
        with serving_u(rv, "float32", bind=bind) as first:
            assert client.predict({"u": U}, timeout=LONG).version == VERSION
        with serving_u(rv, "float64", bind=bind) as second:
            assert second.endpoint == first.endpoint
            u64 = U.astype(np.float64)
            while True:  # (until it serves: the fallbacks of a trainer restarting first)
                try:
                    outputs, version = client.predict({"u": u64}, timeout=LONG)
                    break
                except PredictTimeout:
                    continue
            assert version == VERSION
            np.testing.assert_array_equal(outputs["y"], 2 * u64 + VERSION)
