"""The hooks page's promise about a hook's own figures (docs/how-to/hooks.md, "Your own
figures in the logs"): what `log_figures` returns is added to every log (`on_log`'s
`logs`, `state.log_history`), and a key that is one of the trainer's own is refused,
naming it, rather than overwriting the trainer's figure (the ServingHook's tests cover
the sum and maximum over two ranks and TensorBoard; this one, a user's own hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)


class Figures(Hook):
    """Logs `figures` at every log, and keeps what `on_log` was given."""

    def __init__(self, figures: dict[str, float]) -> None:
        self.figures = figures
        self.seen: list[dict[str, float]] = []

    def log_figures(self, trainer: Any) -> dict[str, float]:
        return dict(self.figures)

    def on_log(self, trainer: Any, state: Any, control: Any, logs: dict[str, float]) -> None:
        self.seen.append(dict(logs))


def trainer(out: Path, hook: Hook) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=4,
        logging_steps=2,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80, 0)),
        process_sample=xy,
        hooks=[hook],
    )


def test_a_hooks_figure_is_in_every_log_and_the_history(tmp_path: Path) -> None:
    hook = Figures({"my_count": 3.0})
    run = trainer(tmp_path / "out", hook)
    run.train()
    assert [logs["my_count"] for logs in hook.seen] == [3.0, 3.0]  # steps 2 and 4
    assert all("loss" in logs for logs in hook.seen)  # beside the trainer's own
    history = [h for h in run.state.log_history if "my_count" in h]
    assert [h["my_count"] for h in history] == [3.0, 3.0]


def test_a_hooks_figure_named_as_one_of_the_trainers_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    hook = Figures({"loss": 0.0})
    with pytest.raises(ValueError, match=r"'loss' is one of the trainer's own"):
        trainer(tmp_path / "out", hook).train()
    assert hook.seen == []  # refused before any log reached a hook, not overwritten
