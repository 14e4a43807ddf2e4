"""A model slower than the clients' timeout is said in the trainer's log (a user's
trial, 2026-12-06: a 1 s forward, clients' timeout 0.5 s, 40 of 40 requests raised
`PredictTimeout` and the trainer warned of nothing: the counts were in the per-step
figures only, the end-of-run line at INFO, hidden by Python's default logging). Now one
WARNING names the forward's measured time, the clients' timeout and the fixes, once,
not per request (`hooks.serving_slow`), and the end-of-run line is a WARNING when
requests were lost to their timeout. Each test failed before (no such warning; the end
line at INFO)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, xy

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments
from melissa_trainer.client import PredictionUnavailable, Predictor
from melissa_trainer.hooks.serving_slow import WINDOW_S, SlowServing

INPUTS = {"x": ((3,), "float32")}
FORWARD_S = 0.4  # the slow model's forward, in eval mode (serving)
TIMEOUT_S = 0.1  # the clients' timeout: shorter than one forward
N_REQUESTS = 10


class SlowModel(torch.nn.Module):
    """A linear model whose forward sleeps `FORWARD_S` when serving (eval mode): the
    user's slow surrogate. Training (train mode) is not slowed."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            time.sleep(FORWARD_S)  # (the scenario, not a synchronisation)
        return self.net(x)


class Asker(Hook):
    """At step 3's end, asks `N_REQUESTS` predictions one after the other over the real
    serving socket, each with the short timeout, and holds the training thread until
    they are all over (the hook's idle thread serves them meanwhile)."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.outcomes: list[str] = []

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step != 3:
            return

        def ask() -> None:
            x = np.ones(3, np.float32)
            with Predictor(0, endpoint=self.serving.endpoint) as predictor:
                for _ in range(N_REQUESTS):
                    try:
                        predictor.predict({"x": x}, timeout=TIMEOUT_S)
                        self.outcomes.append("answered")
                    except PredictionUnavailable as exc:
                        self.outcomes.append(type(exc).__name__)

        thread = threading.Thread(target=ask)
        thread.start()
        thread.join(120)


@pytest.mark.timeout(180)
def test_a_model_slower_than_the_clients_timeout_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    serving = ServingHook(
        INPUTS, process_inputs=lambda s: torch.from_numpy(s["x"].copy()), bind="tcp://127.0.0.1:*"
    )
    serving._failures_clock = lambda: 0.0  # (frozen: the window never ends in this test)
    asker = Asker(serving)
    model = SlowModel()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path), batch_size=8, buffer="fifo",
                          disable_progress_bar=True, report_to="none"),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80)),
        process_sample=xy,
        hooks=[serving, asker],
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="melissa_trainer.hooks.serving"):
        trainer.train()
    # every request failed on the client's side: a forward outlasts its timeout
    assert asker.outcomes == ["PredictTimeout"] * N_REQUESTS, asker.outcomes
    counts = serving.telemetry()
    lost = counts.get("answered_late", 0) + counts.get("expired", 0)
    assert lost >= 4 and counts.get("answered", 0) == counts.get("answered_late", 0), counts

    records = [r for r in caplog.records if r.name == "melissa_trainer.hooks.serving"]
    slow = [r for r in records if "too late to be used" in r.getMessage()]
    assert len(slow) == 1, [r.getMessage() for r in slow]  # once, not per request
    words = slow[0].getMessage()
    assert slow[0].levelno == logging.WARNING
    assert words.startswith("serving of rank 0: "), words
    assert "the model's forward took 0.4" in words or "the model's forward took 0.5" in words
    assert "the clients' timeout 0.1 s" in words, words
    assert "a forward alone outlasts the timeout" in words, words
    for fix in ("smaller or faster model", "Client.predict", "Predictor.predict",
                "mt_predict's timeout_s", "default 10 s"):  # fmt: skip
        assert fix in words, (fix, words)

    end = [r for r in records if r.getMessage().startswith("serving of rank 0: ")]
    end = [r for r in end if "expired; latency" in r.getMessage()]
    assert len(end) == 1 and end[0].levelno == logging.WARNING, end


def test_the_warning_comes_again_only_while_it_lasts() -> None:
    """The rule on an injected clock and counters: warned at once when most of a
    window's requests were late, not again within `WINDOW_S` however many more are
    late, again after it if most of that window's were late too, and not after a
    window of answers in time."""
    logger = logging.getLogger("test_serving_slow")
    now = [0.0]
    settings = {"max_batch": 32, "max_latency_steps": 16, "share": 0.05}
    watch = SlowServing(logger, "serving of rank 0", lambda: now[0], lambda: 0.01, settings)
    watch.forward(0.2)
    watch.check({"answered": 3, "answered_late": 3}, [100] * 3)
    assert watch.warnings == 0  # (too few to judge)
    watch.check({"answered": 5, "answered_late": 4, "expired": 1}, [100] * 2)
    assert watch.warnings == 1
    for i in range(1, 50):  # every request late, one check per step: no new line
        now[0] = i
        watch.check({"answered": 5 + i, "answered_late": 4 + i, "expired": 1}, [100])
    assert watch.warnings == 1
    now[0] = WINDOW_S + 1
    watch.check({"answered": 60, "answered_late": 59, "expired": 1}, [100])
    assert watch.warnings == 2  # it lasted: said again
    now[0] = 2 * WINDOW_S + 2
    watch.check({"answered": 100, "answered_late": 59, "expired": 1}, [])
    now[0] = 3 * WINDOW_S + 3
    watch.check({"answered": 140, "answered_late": 59, "expired": 1}, [])
    assert watch.warnings == 2  # answered in time since: quiet
