"""A solver the trainer refused is told so when it asks for a prediction, as at a send
(`melissa_trainer.client.admission_watch`: why): once its watch learnt the refusal,
`Client.predict` raises the sends' `SimulationRefused` (a ValueError naming the field
and the fix, not a `PredictionUnavailable` a solver falls back from), without asking;
a solver the trainer took is answered. Before, the refused solver was answered by the
study's model, and a solver that only asks never heard of the refusal until its close."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import running
from predict_server import VERSION, answering_server
from test_admission_watch import external, watch_ended
from waiting import wait_until

from melissa_trainer.client import Client
from melissa_trainer.client.admission import SimulationRefused

pytestmark = pytest.mark.timeout(120)

STUDY = {"u": ((4,), np.float64)}
INPUTS = {"u": np.arange(4, dtype=np.float32)}


def test_a_refused_simulation_asking_for_a_prediction_is_told_it_was_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    external(monkeypatch, tmp_path)
    with (
        running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a") as receiver,
        answering_server(tmp_path, run_id="run-a") as (server, _),
    ):
        client = Client(simulation_id=1, fields={"vort": ((4,), np.float64)})
        try:
            wait_until(receiver.refused, "the HELLO's refusal", interval=0.005)
            watch_ended(client)
            with pytest.raises(SimulationRefused) as caught:
                client.predict(INPUTS, timeout=5.0)
            with pytest.raises(
                SimulationRefused, match="refused it, and dropped everything it sent"
            ):  # (every later request)
                client.predict(INPUTS, timeout=5.0)
            with pytest.raises(SimulationRefused) as sent:  # (the same sentence as a send's)
                client.send(0, vort=np.zeros(4))
        finally:
            client.close(bye=False)
    assert str(caught.value) == str(sent.value)
    assert "field 'vort' is not one of the study's" in str(caught.value)
    assert "Run it again declaring the study's fields" in str(caught.value)
    assert client._asking.predictor is None  # (nothing asked of the server)


def test_a_simulation_taken_is_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    external(monkeypatch, tmp_path)
    with (
        running(rendezvous_dir=tmp_path, fields=STUDY, run_id="run-a"),
        answering_server(tmp_path, run_id="run-a"),
        Client(simulation_id=2, fields=STUDY) as client,
    ):
        watch_ended(client)
        assert client._watch.admitted is True
        outputs, version = client.predict(INPUTS, timeout=30.0)
        assert version == VERSION
        np.testing.assert_array_equal(outputs["y"], 2 * INPUTS["u"] + VERSION)
