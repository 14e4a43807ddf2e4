"""The serving counters in the trainer's logs (issue 47): `ServingHook.log_figures`
through the trainer's log reduction into ``state.log_history``, the console and
TensorBoard (``serving/*``), read back. The oracle is what the test itself did: one
request refused before training, one malformed request over a real socket, two
answered (one in process from a thread, one through a `Predictor`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zmq
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, ServingHook, TrainingArguments
from melissa_trainer import wire as protocol
from melissa_trainer.client import Predictor
from melissa_trainer.hooks.serving_report import log_figures, summary
from melissa_trainer.stream.serving_queue import ServingRefused

INPUTS = {"x": ((3,), "float32")}
FIGURES = ("requests", "answered", "refused", "malformed", "expired", "batches")


class Requests(Hook):
    """Refused before training (from a thread: calls from the training thread run at
    once and are not counted); at step 3, a malformed request (waits for its
    ``bad_request`` reply) and an in-process one from a thread; at step 4, one over a
    socket from a thread; at step 5, training waits until both are answered."""

    def __init__(self, serving: ServingHook) -> None:
        self.serving = serving
        self.refused: Exception | None = None
        self.reply: Any = None
        self.threads: list[threading.Thread] = []
        self.versions: list[int] = []

    def on_source_started(self, trainer: Any, state: Any, control: Any) -> None:
        def early() -> None:  # (from another thread: queued, hence counted)
            try:
                self.serving.predict({"x": np.zeros(3, np.float32)}, timeout=5)
            except ServingRefused as exc:
                self.refused = exc

        thread = threading.Thread(target=early)
        thread.start()
        thread.join(30)

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        x = np.ones(3, np.float32)
        if state.global_step == 3:
            ctx = zmq.Context.instance()
            with ctx.socket(zmq.DEALER) as sock:
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(self.serving.endpoint)
                bad = {"x": np.ones(4, np.float32)}  # (a shape the hook does not take)
                sock.send_multipart(protocol.encode_predict(0, 1, 30_000, None, bad))
                assert sock.poll(30_000), "no reply to the malformed request"
                frames = sock.recv_multipart()
                self.reply = protocol.decode_reply(frames, 1 << 20)

            def in_process() -> None:
                self.versions.append(self.serving.predict({"x": x}, timeout=60).version)

            self.threads.append(threading.Thread(target=in_process))
        if state.global_step == 4:

            def remote() -> None:
                with Predictor(0, endpoint=self.serving.endpoint) as predictor:
                    self.versions.append(predictor.predict({"x": x}, timeout=60).version)

            self.threads.append(threading.Thread(target=remote))
        if state.global_step in (3, 4):
            self.threads[-1].start()
        if state.global_step == 5:
            # Training waits here for both answers (the idle thread serves them: no step
            # runs): without it, a loaded machine's threads asked after the last step
            # and were refused (1 answer of 2).
            for thread in self.threads:
                thread.join(60)


def test_the_serving_counters_are_in_the_logs_and_tensorboard(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    serving = ServingHook(
        INPUTS,
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        bind="tcp://127.0.0.1:*",
    )
    requests = Requests(serving)
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            buffer="fifo",
            logging_steps=5,
            report_to="tensorboard",
            disable_progress_bar=True,
        ),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(160)),
        process_sample=xy,
        hooks=[serving, requests],
    )
    with caplog.at_level("INFO", logger="melissa_trainer.hooks.serving"):
        state = trainer.train()
    for thread in requests.threads:
        thread.join(60)
    assert requests.refused is not None and requests.refused.reason == "not_serving"
    assert requests.reply.reason == "bad_request"
    assert len(requests.versions) == 2

    logs = [entry for entry in state.log_history if "serving_requests" in entry]
    assert logs, state.log_history
    final = logs[-1]
    assert final["step"] == state.global_step == 20
    expected = {"requests": 3, "answered": 2, "refused": 1, "malformed": 1, "expired": 0}
    assert {k: final[f"serving_{k}"] for k in expected} == expected
    assert 1 <= final["serving_batches"] <= 2
    assert 0 <= final["serving_latency_steps_p50"] <= final["serving_latency_steps_p99"] <= 16
    assert final["serving_latency_ms_p99"] > 0
    counts = [entry["serving_requests"] for entry in logs]
    assert counts == sorted(counts)  # cumulative

    acc = EventAccumulator(str(tmp_path / "out" / "runs"), size_guidance={"scalars": 0})
    acc.Reload()
    for name in FIGURES:
        events = acc.Scalars(f"serving/{name}")
        assert events[-1].step == 20 and events[-1].value == final[f"serving_{name}"], name

    ends = [r for r in caplog.records if r.name == "melissa_trainer.hooks.serving"]
    ends = [r for r in ends if r.getMessage().startswith("serving of rank 0: ")]
    assert [r.levelname for r in ends] == ["INFO"]  # (none lost: WARNING is for expired)
    lines = [r.getMessage() for r in ends]
    assert lines == [summary(0, serving.telemetry())]
    assert "3 requests, 2 answered in" in lines[0] and "1 refused (not_serving 1)" in lines[0]
    assert "1 malformed" in lines[0]


def test_two_hooks_may_not_log_one_figure(tmp_path: Path) -> None:
    class Twice(Hook):
        def __init__(self, name: str) -> None:
            self._name = name

        @property
        def name(self) -> str:
            return self._name

        def log_figures(self, trainer: Any) -> dict[str, float]:
            return {"serving_requests": 1.0}

    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path), batch_size=8, buffer="fifo",
                          logging_steps=5, disable_progress_bar=True, report_to="none"),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(160)),
        process_sample=xy,
        hooks=[Twice("a"), Twice("b")],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"hook b logs figures another hook logs.*requests"):
        trainer.train()


def test_the_logged_serving_share_is_the_hooks_own() -> None:
    """The share of training time spent serving, as `telemetry()` gives it, is the one
    logged and the one the end-of-run line prints (it was logged as 0 whatever was
    spent: the log read a key `telemetry()` does not have)."""
    serving = ServingHook(INPUTS, process_inputs=lambda s: torch.from_numpy(s["x"].copy()))
    serving.budget.earn(2.0)  # two seconds of training...
    serving.budget.spend(0.125)  # ...and 0.125 s of serving charged to them
    assert serving.telemetry()["serving_share"] == 0.0625
    assert log_figures(serving.telemetry())["serving_share"] == 0.0625
    assert summary(0, serving.telemetry()).endswith("; 6.2% of training time")
