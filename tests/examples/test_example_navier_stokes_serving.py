"""The neural-operator how-to's "Serve it back while it trains": the example's FNO,
given a `ServingHook` through `main(hooks=[...])`, answers a process that asks for
predictions while it trains (a user trial, htrial7: the page said nothing of serving,
the goal of a user who wants the surrogate back in the simulations).

The oracle is independent of the serving code: the answer's shape is the model's
output for one request, (1, n, n) (the example's FNO maps (batch, CHANNELS, n, n) to
(batch, 1, n, n)), its values are finite, and its model version is a training step of
the run (at least 1, at most the run's last step)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# examples/ is on the tests' sys.path (pyproject)
from navier_stokes import train
from process_tree import processes_with

from melissa_trainer import ServingHook
from melissa_trainer.client import PredictionUnavailable
from melissa_trainer.client.predict import Predictor

N = 32
TINY = [
    "--num_simulations", "16", "--time_steps", "5", "--grid_size", str(N), "--dt", "0.05",
    "--width", "12", "--modes", "8", "--layers", "2", "--num_validation", "2",
    "--buffer_size", "80", "--watermark", "16", "--batch_size", "8",
    "--sample_to_insert_ratio", "20", "--eval_steps", "none", "--logging_steps", "100",
    "--job_limit", "2", "--disable_progress_bar", "--no_plot",
]  # fmt: skip


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_example_serves_its_fno_while_it_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "out"
    serving = ServingHook(inputs={"x": ((train.CHANNELS, N, N), "float32")})
    answers: list[tuple[int, Any]] = []
    trained = threading.Event()  # the asker stops at the first trained answer or the end

    def ask() -> None:
        x = np.random.default_rng(0).standard_normal((train.CHANNELS, N, N)).astype(np.float32)
        with Predictor(7, rendezvous_dir=out / "rendezvous") as predictor:
            while not trained.is_set():
                try:
                    outputs, version = predictor.predict({"x": x}, timeout=2.0)
                except PredictionUnavailable:  # not serving yet, or training over
                    continue
                answers.append((version, outputs["prediction"]))
                if version >= 1:
                    trained.set()

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    try:
        summary = train.main([*TINY, "--output_dir", str(out)], hooks=[serving])
    finally:
        trained.set()
        asker.join(30)
    assert not asker.is_alive()
    served = [(v, p) for v, p in answers if v >= 1]
    assert served, f"no answer from a trained model: {[v for v, _ in answers]}"
    version, prediction = served[0]
    assert version <= summary["steps"]
    assert prediction.shape == (1, N, N) and np.isfinite(prediction).all()
    assert processes_with(str(out / "rendezvous")) == []  # no solver outlived the trainer
