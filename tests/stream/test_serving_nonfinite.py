"""A prediction request whose inputs hold NaN or Inf follows the receiver's
``nonfinite`` policy, as the samples a simulation sends do: refused ``bad_request``
(the detail naming the input and the policy) under ``"refuse"`` (the default) and
``"fail"``, served under ``"accept"``. The client sends it as it is (it never refuses
on its side) and warns once per predictor. Real sockets: a `PredictServer` in this
process, drained by the stand-in model of `predict_server` (``y = 2 u + VERSION``), and a
`Predictor`.

Before: every such request was served (the model answered NaN), under any policy, and
the client said nothing.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from predict_server import INPUTS, VERSION, drain

from melissa_trainer.client import Predictor, PredictRefused
from melissa_trainer.hooks.serving_socket import rank_server
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.timeout(60)


def serve(tmp_path: Path, policy: str | None) -> PredictServer:
    """A started, serving `PredictServer` of `INPUTS` under `policy` (None: the default)."""
    kwargs = {} if policy is None else {"nonfinite": policy}
    server = PredictServer(INPUTS, rendezvous_dir=tmp_path, **kwargs)
    server.start()
    server.serving = True
    return server


@pytest.mark.parametrize("policy", [None, "refuse", "fail"])
def test_nonfinite_inputs_are_refused_naming_the_input_and_the_policy(
    tmp_path: Path, policy: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(tmp_path, policy)
    stop = threading.Event()
    thread = drain(server, stop)
    u = np.arange(4, dtype=np.float32)
    caught: list[PredictRefused] = []
    try:
        with caplog.at_level(logging.WARNING), Predictor(5, rendezvous_dir=tmp_path) as client:
            for bad in (np.nan, np.inf):  # (two requests: the client warns once)
                with pytest.raises(PredictRefused) as refused:
                    client.predict({"u": np.where(u == 2, bad, u).astype(np.float32)}, timeout=30)
                caught.append(refused.value)
            outputs, version = client.predict({"u": u}, timeout=30)  # (finite: served)
    finally:
        stop.set()
        thread.join()
        server.stop()
    said = policy or "refuse"
    for refusal in caught:
        assert refusal.reason == "bad_request"
        assert refusal.detail == (
            f"nonfinite: input 'u' holds NaN or Inf; this trainer refuses such requests "
            f"(its nonfinite={said!r}; nonfinite='accept' serves them)"
        )
    np.testing.assert_array_equal(outputs["y"], 2 * u + VERSION)
    assert server.telemetry() == {"requests": 3, "refused_nonfinite": 2, "answered": 1}
    client_warnings = [r for r in caplog.records if r.name == "melissa_trainer.client.client"]
    assert len(client_warnings) == 1
    assert "Predictor(simulation_id=5): predict() input 'u' holds NaN or Inf" in (
        client_warnings[0].message
    )
    trainer_lines = [r.getMessage() for r in caplog.records if r.name.endswith("stream.serving")]
    assert trainer_lines[0].startswith(
        "serving of rank 0: refused a request of simulation 5: nonfinite: input 'u'"
    )


def test_under_accept_nonfinite_inputs_are_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(tmp_path, "accept")
    stop = threading.Event()
    thread = drain(server, stop)
    u = np.array([0.0, np.nan, np.inf, 1.0], np.float32)
    try:
        with caplog.at_level(logging.WARNING), Predictor(0, rendezvous_dir=tmp_path) as client:
            outputs, version = client.predict({"u": u}, timeout=30)
    finally:
        stop.set()
        thread.join()
        server.stop()
    assert version == VERSION
    np.testing.assert_array_equal(outputs["y"], 2 * u + VERSION)  # (NaN == NaN here)
    assert server.telemetry() == {"requests": 1, "answered": 1}
    assert any("holds NaN or Inf" in r.message for r in caplog.records)  # (the client's)


@pytest.mark.parametrize("policy", ["refuse", "accept", "fail"])
def test_a_serving_hook_serves_with_its_stream_receivers_policy(
    tmp_path: Path, policy: str
) -> None:
    """`rank_server` gives the rank's server the stream's `ReceiverConfig.nonfinite`."""
    stream = StreamSource(ReceiverConfig(nonfinite=policy, rendezvous_dir=str(tmp_path)))
    trainer = SimpleNamespace(source=stream, process_index=0, num_processes=1, run_id=None)
    server = rank_server(field_specs(INPUTS), trainer, None, None, 4)  # type: ignore[arg-type]
    assert server is not None and server.nonfinite == policy


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="nonfinite must be one of 'refuse', 'accept', 'fail'"):
        PredictServer(INPUTS, nonfinite="drop")
