"""The warning of a prediction's inputs holding NaN or Inf names the asker truly: a
`Client`'s requests (a simulation's) in the C client's words, "simulation N ... of this
client" (clients/c/src/finite_notice.c, tests/c/test_c_predict_nonfinite.py); a
`Predictor` of its own, which need not be a simulation's (an analysis script asking
with some id), as "Predictor(simulation_id=N) ... of this predictor".

Found in a user trial (hserve, 2026-12-05): a standalone `Predictor` said "simulation 5"
(none ran) and "this client" (none was made). Failed before: the Predictor's words.

A real `PredictServer` (a thread answers), a real stream receiver for the `Client`."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from predict_server import answering_server
from test_admission_watch import external, watch_ended

from melissa_trainer.client import Client, Predictor, PredictRefused

pytestmark = pytest.mark.timeout(120)

NAN = {"u": np.array([1.0, np.nan, 3.0, 4.0], np.float32)}
#: the C client's sentence (tests/c/test_c_predict_nonfinite.py), its names Python's
C_WORDS = (
    "simulation 2: mt_predict() input 'u' holds NaN or Inf; it is sent as it is and the "
    "trainer applies its nonfinite policy to it (by default the request is refused: "
    "MT_EREFUSED, MT_REFUSAL_BAD_REQUEST). Later non-finite inputs of this client are not "
    "logged."
)


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "holds NaN or Inf" in r.getMessage()
            and r.name.startswith("melissa_trainer.client")]  # fmt: skip


def test_a_predictor_of_its_own_is_not_called_a_simulation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        answering_server(tmp_path),
        Predictor(5, rendezvous_dir=tmp_path) as predictor,
        caplog.at_level(logging.WARNING),
        pytest.raises(
            PredictRefused,
            match=r"refused the prediction \(bad_request\): nonfinite: input 'u'",
        ),
    ):
        predictor.predict(NAN, timeout=30.0)
    assert said(caplog) == [
        "Predictor(simulation_id=5): predict() input 'u' holds NaN or Inf; it is sent as it "
        "is and the trainer applies its nonfinite policy to it (by default the request is "
        "refused: PredictRefused, reason 'bad_request'). Later non-finite inputs of this "
        "predictor are not logged."
    ]


def test_a_clients_requests_are_its_simulations_in_the_c_clients_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    external(monkeypatch, tmp_path)
    study = {"u": ((4,), np.float64)}
    with (
        running(rendezvous_dir=tmp_path, fields=study, run_id="run-a"),
        answering_server(tmp_path, run_id="run-a"),
        Client(simulation_id=2, fields=study) as client,
    ):
        watch_ended(client)
        with (
            caplog.at_level(logging.WARNING),
            pytest.raises(
                PredictRefused,
                match=r"refused the prediction \(bad_request\): nonfinite: input 'u'",
            ),
        ):
            client.predict(NAN, timeout=30.0)
    c_words = C_WORDS.replace("mt_predict()", "predict()").replace(
        "MT_EREFUSED, MT_REFUSAL_BAD_REQUEST", "PredictRefused, reason 'bad_request'"
    )
    assert said(caplog) == [c_words]
