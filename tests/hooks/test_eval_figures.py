"""A hook's own validation metrics (trial 5's F3): what `Hook.eval_figures` returns is
added to each validation's metrics before anything reads them, so it reaches the
console, TensorBoard (read back with its own reader), ``state.log_history`` and the
hooks' `on_validation_end`, and, declared in `eval_keys`, can be
`metric_for_best_model`. A key a hook adds to `metrics` or `logs` itself reaches none
of them (the built-in renderers come first): that is a warning naming the way that
does."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)


class RelL2(Hook):
    """A metric of its own over the whole validation set, on every rank alike."""

    eval_keys = frozenset({"rel_l2"})

    def __init__(self) -> None:
        self.modes: list[tuple[bool, bool]] = []  # (model.training, grad enabled) when called
        self.values: list[float] = []

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        self.modes.append((trainer.model.training, torch.is_grad_enabled()))
        num = den = 0.0
        for sample in trainer.eval_dataset:
            x, y = xy(sample)
            pred = trainer.model(x.unsqueeze(0)).squeeze(0)
            num += float(((pred - y) ** 2).sum())
            den += float((y**2).sum())
        self.values.append((num / den) ** 0.5)
        return {"rel_l2": self.values[-1]}


class Seen(Hook):
    """Keeps what each validation's metrics were for the hooks."""

    def __init__(self) -> None:
        self.metrics: list[dict[str, float]] = []

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.metrics.append(dict(metrics))


def trainer(out: Path, hooks: list[Hook], **overrides: Any) -> OnlineTrainer:
    options: dict[str, Any] = dict(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=6,
        logging_steps=3,
        eval_steps=3,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    return OnlineTrainer(
        model,
        TrainingArguments(**{**options, **overrides}),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(200, 0)),
        process_sample=xy,
        eval_dataset=list(linear_samples(12, 5)),
        hooks=hooks,
    )


def test_a_hooks_metric_reaches_console_tensorboard_history_and_hooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rel, seen = RelL2(), Seen()
    run = trainer(tmp_path / "out", [rel, seen], report_to="tensorboard")
    run.train()
    assert len(rel.values) == 2  # steps 3 and 6
    assert rel.modes == [(False, False)] * 2  # eval mode, no gradients
    assert run.model.training  # and back to training afterwards
    assert [m["eval_rel_l2"] for m in seen.metrics] == rel.values
    assert all("eval_loss" in m for m in seen.metrics)  # beside the trainer's own
    history = [h["eval_rel_l2"] for h in run.state.log_history if "eval_rel_l2" in h]
    assert history == rel.values
    console = [line for line in capsys.readouterr().out.splitlines() if "eval_rel_l2" in line]
    assert [line.split(" | ")[0] for line in console] == ["step 3", "step 6"]
    acc = EventAccumulator(str(tmp_path / "out" / "runs"), size_guidance={"scalars": 0})
    acc.Reload()
    points = acc.Scalars("eval/rel_l2")
    assert [p.step for p in points] == [3, 6]
    assert [p.value for p in points] == pytest.approx(rel.values, rel=1e-6)


def test_a_declared_hook_metric_is_the_best_model_metric(tmp_path: Path) -> None:
    rel = RelL2()
    run = trainer(tmp_path / "out", [rel], metric_for_best_model="rel_l2")
    run.train()
    assert run.state.best_metric == min(rel.values)


def test_an_undeclared_hook_metric_is_refused_as_best_model_metric_when_built(
    tmp_path: Path,
) -> None:
    class Undeclared(RelL2):
        eval_keys = frozenset()

    with pytest.raises(ValueError, match=r"'rel_l2' is not a metric.*declare it in the eval_keys"):
        trainer(tmp_path / "out", [Undeclared()], metric_for_best_model="rel_l2")


def test_a_hook_metric_named_as_the_trainers_is_refused_naming_it(tmp_path: Path) -> None:
    class Clash(Hook):
        def eval_figures(self, trainer: Any) -> dict[str, float]:
            return {"loss": 1.0}  # -> eval_loss, the trainer's

    with pytest.raises(ValueError, match=r"Clash's eval_figures gives 'loss'.*'eval_loss' already"):
        trainer(tmp_path / "out", [Clash()]).train()


def test_a_declared_key_not_returned_is_refused(tmp_path: Path) -> None:
    class Forgets(RelL2):
        def eval_figures(self, trainer: Any) -> dict[str, float]:
            return {}

    with pytest.raises(ValueError, match=r"declares \['eval_rel_l2'\] in its eval_keys"):
        trainer(tmp_path / "out", [Forgets()]).train()


def test_an_eval_figures_returning_none_is_refused_naming_the_hook(tmp_path: Path) -> None:
    """A trial's hook whose eval_figures forgot its ``return``: a raw "AttributeError:
    'NoneType' object has no attribute 'items'" named neither the hook nor the fix."""

    class Forgot(Hook):
        def eval_figures(self, trainer: Any) -> dict[str, float]:
            return None  # type: ignore[return-value]

    with pytest.raises(TypeError, match=r"hook Forgot's eval_figures returned None, not a dict"):
        trainer(tmp_path / "out", [Forgot()]).train()


class AddsItself(Hook):
    """The Hugging Face habit: a key written into `logs` and `metrics`."""

    def on_log(self, trainer: Any, state: Any, control: Any, logs: Any) -> None:
        logs["my_key"] = 1.0

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        metrics["eval_mine"] = 2.0


def test_a_key_added_to_logs_or_metrics_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        trainer(tmp_path / "out", [AddsItself()]).train()
    said = [r.getMessage() for r in caplog.records if "reaches only the hooks after" in r.message]
    assert len(said) == 2  # once each, not at every log and validation
    assert "AddsItself.on_log added 'my_key' to logs" in said[0]
    assert "log_figures" in said[0]
    assert "AddsItself.on_validation_end added 'eval_mine' to metrics" in said[1]
    assert "eval_figures" in said[1]
