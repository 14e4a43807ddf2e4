"""A hook whose `on_log` reads an ``eval_`` key from its logs is warned of when it is
added (user trial htrial46): a Hugging Face callback's `on_log` receives the
evaluation's metrics too (``if "eval_loss" in logs: ...``); here a log holds the
training figures only and the metrics go to `on_validation_end`, so the ported hook
never found the key, silently. The second test pins that contract on a tiny run."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.hooks.base import HookList


class InLogs(Hook):
    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        if "eval_loss" in logs:
            print(logs["eval_loss"])


class GetFromLogs(Hook):
    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any = None) -> None:
        best = logs.get("eval_accuracy")
        print(best)


class IndexRenamed(Hook):
    def on_log(self, trainer: Any, state: Any, control: Any, figures: Any) -> None:
        print(figures[ "eval_loss_max" ])  # fmt: skip


@pytest.mark.parametrize(
    ("hook", "key"),
    [(InLogs(), "eval_loss"), (GetFromLogs(), "eval_accuracy"), (IndexRenamed(), "eval_loss_max")],
)
def test_an_on_log_reading_an_eval_key_is_warned_of(hook: Hook, key: str) -> None:
    with pytest.warns(UserWarning, match=rf"on_log reads '{key}' from its logs") as got:
        HookList([hook])
    assert "on_validation_end(self, trainer, state, control, metrics)" in str(got[0].message)


class Training(Hook):
    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        print(logs["loss"], logs.get("learning_rate"), state.log_history[-1].get("eval_loss"))


def test_reading_training_figures_says_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HookList([Training()])


class Keys(Hook):
    def __init__(self) -> None:
        self.logged: list[set[str]] = []
        self.validated: list[set[str]] = []

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        self.logged.append(set(logs))

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.validated.append(set(metrics))


@pytest.mark.timeout(120)
def test_a_log_holds_no_validation_metric(tmp_path: Path) -> None:
    model = torch.nn.Linear(1, 1)
    samples = [{"x": torch.ones(1), "y": torch.ones(1)} for _ in range(32)]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        report_to="none",
        batch_size=4,
        buffer="fifo",
        logging_steps=2,
        eval_steps=2,
        disable_progress_bar=True,
        save_at_end=False,
    )
    keys = Keys()
    OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=samples,
        process_sample=lambda s: (s["x"], s["y"]),
        eval_dataset=samples[:4],
        hooks=[keys],
    ).train()
    assert keys.logged and keys.validated
    assert all("eval_loss" in m for m in keys.validated)
    assert not any(k.startswith("eval_") for logged in keys.logged for k in logged)
