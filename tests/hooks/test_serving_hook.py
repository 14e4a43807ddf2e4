"""`ServingHook` in process (issue 47): its budget's arithmetic, its checks, and its
in-process API on a trainer without a network source (no socket is bound then).

Oracle for predictions: the model's own forward, computed by the test at the version
the answer names (the weights are recorded by a hook at every step end).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments
from melissa_trainer.client import Predictor
from melissa_trainer.hooks.serving_budget import BURST_STEPS, IDLE_MIN, IDLE_STEPS, ServingBudget
from melissa_trainer.stream.serving_queue import ServingRefused

INPUTS = {"x": ((3,), "float32")}


def test_budget_bounds_serving_to_its_share_plus_one_batch() -> None:
    """A flood that would take every step: serving gets `share` of the training time,
    exceeded by one batch at most, at every step (not only on average)."""
    budget = ServingBudget(0.05)
    step, batch = 0.010, 0.003  # seconds
    for _ in range(1000):
        budget.earn(step)
        while budget.allows():
            budget.spend(batch)
        assert budget.serving_seconds <= 0.05 * budget.training_seconds + batch + 1e-12
    assert budget.used_share == pytest.approx(0.05, abs=batch / budget.training_seconds)


def test_budget_credit_is_capped_after_idle_steps() -> None:
    budget = ServingBudget(0.05)
    for _ in range(1000):
        budget.earn(0.01)  # nothing to serve
    assert budget.credit == pytest.approx(0.05 * BURST_STEPS * 0.01)


def test_idleness_is_judged_on_the_steps_own_durations_not_the_waits_between() -> None:
    """A data-starved trainer: steps of 5 ms, a second's wait for data between them.
    Training is idle after 3 steps' compute (15 ms), not after 3 seconds (the old
    rule, which counted the waits as steps: its closed-loop solvers timed out); a
    first step that compiled for 30 s does not move the median."""
    budget = ServingBudget(0.05)
    assert budget.idle_after() == IDLE_MIN  # before any step
    budget.record_step(30.0)
    for _ in range(10):
        budget.earn(1.005)  # the time between two step ends: the wait included
        budget.record_step(0.005)
    assert budget.idle_after() == pytest.approx(max(IDLE_MIN, IDLE_STEPS * 0.005))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(inputs={"a": ((1,), "float32"), "b": ((1,), "float32")}), "give process_inputs"),
        (dict(inputs=INPUTS, share=0), "share must be in"),
        (dict(inputs=INPUTS, share=1.5), "share must be in"),
        (dict(inputs=INPUTS, max_batch=0), "max_batch"),
        (dict(inputs=INPUTS, max_queue=0), "max_queue"),
        (dict(inputs={"x": ((3,), "complex64")}), "cannot be streamed"),
        (dict(inputs={"x": ((0,), "float32")}), "positive dimensions"),
    ],
)
def test_bad_configuration_is_refused_at_construction(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ServingHook(**kwargs)


def trainer_with(tmp_path: Path, *hooks: Hook) -> OnlineTrainer:
    """A trainer of ``small_model()`` (Adam at 1e-2, batches of 8 from a FIFO buffer,
    writing under ``tmp_path/out``) on 160 samples of ``linear_samples`` (20 steps),
    `hooks` after the built-in ones."""
    model = small_model()
    return OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo"),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(160)),
        process_sample=xy,
        hooks=list(hooks),
    )


class Asker(Hook):
    """Asks from the training thread (step 3) and from another thread (step 4); records
    the weights at each step; tries before training starts."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.weights: dict[int, dict[str, torch.Tensor]] = {}
        self.before: Exception | None = None
        self.answers: list[tuple[np.ndarray, Any]] = []
        self.threaded: list[Any] = []
        self.thread: threading.Thread | None = None
        self.bad_inputs: Exception | None = None

    def on_source_started(self, trainer: Any, state: Any, control: Any) -> None:
        try:
            self.serving.predict({"x": np.zeros(3, np.float32)}, timeout=5)
        except ServingRefused as exc:
            self.before = exc

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.weights[state.global_step] = {k: v.clone() for k, v in model.state_dict().items()}
        xs = [np.full(3, i, np.float32) for i in range(3)]
        if state.global_step == 3:
            self.answers.append((xs, self.serving.predict_batch([{"x": x} for x in xs])))
            try:
                self.serving.predict({"x": np.zeros(4, np.float32)})
            except ValueError as exc:
                self.bad_inputs = exc
        if state.global_step == 4:

            def ask() -> None:
                self.threaded.append(self.serving.predict({"x": xs[1]}, timeout=60))

            self.thread = threading.Thread(target=ask)
            self.thread.start()


def test_in_process_predictions_from_a_hook_and_a_thread(tmp_path: Path) -> None:
    serving = ServingHook(INPUTS, process_inputs=lambda s: torch.from_numpy(s["x"].copy()))
    asker = Asker(serving)
    trainer = trainer_with(tmp_path, serving, asker)
    trainer.train()
    assert asker.thread is not None
    asker.thread.join(60)
    assert serving.endpoint is None  # no stream source: nothing bound
    assert isinstance(asker.before, ServingRefused) and asker.before.reason == "not_serving"
    assert asker.bad_inputs is not None and "declared <f4 (3,)" in str(asker.bad_inputs)

    oracle = small_model()

    def expected(version: int, x: np.ndarray) -> np.ndarray:
        oracle.load_state_dict(asker.weights[version])
        with torch.no_grad():
            return oracle(torch.from_numpy(x)).numpy()

    ((xs, (outputs, version)),) = asker.answers
    assert version == 3 and len(outputs) == 3
    for x, out in zip(xs, outputs, strict=True):
        np.testing.assert_allclose(out["prediction"], expected(3, x), rtol=1e-5)
    ((out, version),) = asker.threaded
    assert version >= 4
    np.testing.assert_allclose(out["prediction"], expected(version, np.ones(3, np.float32)))


def test_a_failing_inference_refuses_failed(tmp_path: Path) -> None:
    """process_outputs raising: the queued request gets ``failed``, training goes on."""

    def broken(output: Any) -> Any:
        raise RuntimeError("the user's bug")

    serving = ServingHook(INPUTS, process_outputs=broken)
    caught: list[Exception] = []

    class Ask(Hook):
        thread: threading.Thread | None = None

        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            if state.global_step == 2:

                def ask() -> None:
                    try:
                        serving.predict({"x": np.ones(3, np.float32)}, timeout=60)
                    except ServingRefused as exc:
                        caught.append(exc)

                self.thread = threading.Thread(target=ask)
                self.thread.start()

    ask = Ask()
    trainer = trainer_with(tmp_path, serving, ask)
    state = trainer.train()
    assert ask.thread is not None
    ask.thread.join(60)
    assert state.global_step == 20
    (exc,) = caught
    assert exc.reason == "failed" and "the user's bug" in str(exc)
    assert serving.telemetry()["refused_failed"] == 1


class LateAsker(Hook):
    """Listed after the serving hook: at the end of each step in `at`, starts a thread
    that asks (in process, or through `endpoint` over a real socket) and holds the
    training thread until the request waits in the queue, queued at model version
    `step` (the serving hook set it at this step's end and has drained already)."""

    def __init__(self, serving: ServingHook, at: tuple[int, ...], endpoint: bool) -> None:
        self.serving, self.at, self.endpoint = serving, at, endpoint
        self.answers: dict[int, Any] = {}
        self.threads: list[threading.Thread] = []

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        step = state.global_step
        if step not in self.at:
            return
        x = np.full(3, float(step), np.float32)

        def ask() -> None:
            try:
                if self.endpoint:
                    with Predictor(0, endpoint=self.serving.endpoint) as predictor:
                        self.answers[step] = predictor.predict({"x": x}, timeout=60).version
                else:
                    self.answers[step] = self.serving.predict({"x": x}, timeout=60).version
            except Exception as exc:  # (recorded: the test names it)
                self.answers[step] = exc

        self.threads.append(threading.Thread(target=ask))
        self.threads[-1].start()
        assert self.serving._server.wait_pending(30), "the request never reached the queue"


@pytest.mark.parametrize("endpoint", [False, True], ids=["in-process", "socket"])
def test_a_request_is_answered_within_max_latency_steps(
    tmp_path: Path, endpoint: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that serves nothing (share 1e-9: each step's start charges it the wait
    for the model's lock, more than a step earns), and no idle serving (the test holds
    the training thread while a request reaches the queue): the requests are answered
    by the latency bound alone, by the model exactly `max_latency_steps` versions after
    the one they arrived at (the version in the reply: counted in steps, not in
    seconds). Without the bound they would wait until the run ends and be refused
    ``not_serving``."""
    bound = 3
    serving = ServingHook(
        INPUTS,
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        share=1e-9,
        max_latency_steps=bound,
        bind="tcp://127.0.0.1:*" if endpoint else None,
    )
    monkeypatch.setattr(serving.budget, "idle_after", lambda: 3600.0)  # never idle
    at = (2, 5, 12)
    asker = LateAsker(serving, at, endpoint)
    trainer = trainer_with(tmp_path, serving, asker)
    state = trainer.train()
    for thread in asker.threads:
        thread.join(60)
    assert state.global_step == 20
    assert serving.budget.credit < 0  # (no budget was left for the requests)
    versions = {}
    for step in at:
        versions[step] = asker.answers[step]
        assert isinstance(versions[step], int), f"the request of step {step}: {versions[step]!r}"
    assert versions == {step: step + bound for step in at}
    assert serving.telemetry()["latency_steps_p99"] <= bound


def test_max_latency_steps_is_checked() -> None:
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="max_latency_steps must be an integer >= 0"):
            ServingHook(INPUTS, max_latency_steps=bad)  # type: ignore[arg-type]
    assert ServingHook(INPUTS, max_latency_steps=None).max_latency_steps is None


def test_before_the_first_step_requests_are_answered_by_the_initial_model(tmp_path: Path) -> None:
    """Serving starts with training (TRAIN_START), before the first step: a request that
    comes while training waits (here: held in a hook's `on_train_start`) is answered, over
    the socket, by the model as built, version 0 (serve-while-training.md says so). The
    oracle: a copy of the initial weights, evaluated here."""
    serving = ServingHook(
        INPUTS, process_inputs=lambda s: torch.from_numpy(s["x"].copy()), bind="tcp://127.0.0.1:*"
    )
    x = np.array([0.5, -1.0, 2.0], np.float32)
    got: dict[str, Any] = {}

    class AskFirst(Hook):
        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            def ask() -> None:
                with Predictor(0, endpoint=serving.endpoint) as predictor:
                    got["answer"] = predictor.predict({"x": x}, timeout=60)

            thread = threading.Thread(target=ask)
            thread.start()
            thread.join(90)  # (training waits here: the hook's idle thread answers)

    model = small_model()
    initial = small_model()  # the same seed: the same initial weights
    trainer = OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path), batch_size=8, buffer="fifo",
                          disable_progress_bar=True, report_to="none"),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(64)),
        process_sample=xy,
        hooks=[serving, AskFirst()],
    )  # fmt: skip
    state = trainer.train()
    outputs, version = got["answer"]
    assert version == 0 and state.global_step == 8
    with torch.no_grad():
        expected = initial(torch.from_numpy(x)[None])[0].numpy()
    np.testing.assert_allclose(outputs["prediction"], expected, rtol=1e-6)


def test_failed_inferences_are_summarised_as_rejected_requests_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """process_outputs raising on every call, one request asked at the end of steps 2
    to 5 (each served at the next step's end: max_latency_steps=0), the summary's clock
    injected and moved past its 30 s at step 5's end (after 3 failures): the first failure
    is logged in full with its traceback, the next two only counted, and one summary line
    says the period's three (the first included, as for rejected requests); the failure
    after it, in a new period, is in full again."""

    def broken(output: Any) -> Any:
        raise RuntimeError("the user's bug")

    serving = ServingHook(INPUTS, process_outputs=broken, max_latency_steps=0)
    monkeypatch.setattr(serving.budget, "idle_after", lambda: 3600.0)  # never idle
    now = [0.0]
    serving._failures_clock = lambda: now[0]

    class Clock(Hook):  # (after the serving hook, before the asker: between two failures)
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            if state.global_step == 5:
                now[0] = 100.0

    asker = LateAsker(serving, (2, 3, 4, 5), endpoint=False)
    trainer = trainer_with(tmp_path, serving, Clock(), asker)
    with caplog.at_level("WARNING", logger="melissa_trainer.hooks.serving"):
        state = trainer.train()
    for thread in asker.threads:
        thread.join(60)
    assert state.global_step == 20
    for step in (2, 3, 4, 5):
        refused = asker.answers[step]
        assert isinstance(refused, ServingRefused) and refused.reason == "failed", refused
    assert serving.telemetry()["refused_failed"] == 4
    records = [r for r in caplog.records if r.name == "melissa_trainer.hooks.serving"]
    lines = [r.getMessage() for r in records]
    # (one request, singular: "1 requests" was a user trial's find; the error's words in
    # the line itself, not only in its traceback)
    full = "serving: the inference of 1 request failed: RuntimeError: the user's bug"
    assert lines == [full, "serving of rank 0: in the last 100 s, failed 3 inferences "
                     "(RuntimeError: 3)", full]  # fmt: skip
    for record in (records[0], records[2]):  # in full: with the user's traceback
        assert record.exc_info is not None and "the user's bug" in str(record.exc_info[1])
