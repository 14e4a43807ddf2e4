"""A hook whose `log_figures` gives a figure named as one of the trainer's own (``loss``,
``learning_rate``...) is refused with an error naming the hook's class, the figure and
the names the trainer keeps for itself, so that a user with several hooks knows which to
fix and what to rename to. Before, the error ("a hook's log figure 'loss' is one of the
trainer's own") named neither the hook nor the reserved names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.core.figures import TRAINER_FIGURES, refuse_trainer_figures
from melissa_trainer.sources.iterable import IterableSource

pytestmark = pytest.mark.timeout(120)


class Harmless(Hook):
    def log_figures(self, trainer: Any) -> dict[str, float]:
        return {"my_count": 1.0}


class ShadowsTheLoss(Hook):
    def log_figures(self, trainer: Any) -> dict[str, float]:
        return {"loss": 0.0, "my_other": 2.0}


def refusal(tmp_path: Path, source: Any, hook: Hook) -> str:
    """The error of a short real run with `source`, a harmless hook and `hook`."""
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=2,
        logging_steps=1,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=source, process_sample=xy, hooks=[Harmless(), hook]
    )
    with pytest.raises(ValueError) as raised:
        trainer.train()
    return str(raised.value)


def test_a_hook_figure_named_as_the_trainers_names_the_hook_and_the_reserved_names(
    tmp_path: Path,
) -> None:
    said = refusal(tmp_path, list(linear_samples(40, 0)), ShadowsTheLoss())
    assert "ShadowsTheLoss" in said and "Harmless" not in said, said
    assert "'loss' is one of the trainer's own" in said, said
    assert "my_other" not in said, said  # (only the figure at fault)
    assert all(name in said for name in ("learning_rate", "buffer_fill", "source_")), said


def test_the_reserved_names_are_those_of_a_log() -> None:
    """`TRAINER_FIGURES` is what a log holds before a hook's figures (its oracle: a log)."""
    from melissa_trainer.core.figures import LogFigures

    class Source:
        study_keys: frozenset[str] = frozenset()

        def telemetry(self) -> dict[str, float]:
            return {}

    from melissa_trainer.buffers import FIFOBuffer

    logs, _, _ = LogFigures(torch.device("cpu")).reduce(FIFOBuffer(4), Source(), 1, False, 0.1)  # type: ignore[arg-type]
    assert set(logs) == TRAINER_FIGURES


class CountingSource(IterableSource):
    """A source whose telemetry holds ``messages``: logged as ``source_messages``."""

    def telemetry(self) -> dict[str, float]:
        return {"messages": 3.0}


class ShadowsTheSource(Hook):
    def log_figures(self, trainer: Any) -> dict[str, float]:
        return {"my_other": 2.0, "source_messages": 0.0}


def test_a_hook_figure_named_as_the_sources_telemetry_names_the_hook(tmp_path: Path) -> None:
    """The ``source_*`` clash names the hook's class too (before: "a hook's log figure
    'source_messages'...", from the log's fallback check, which knows no hook)."""
    said = refusal(tmp_path, CountingSource(list(linear_samples(40, 0))), ShadowsTheSource())
    assert said.startswith("hook ShadowsTheSource's log figure 'source_messages'"), said
    assert "Harmless" not in said and "my_other" not in said, said
    assert "source_* for the source's telemetry" in said, said


def test_any_source_name_is_refused_even_one_the_source_does_not_log() -> None:
    """``source_*`` is the source's, whatever its telemetry now: a hook's figure named so
    would clash with a source that adds the figure later."""
    refuse_trainer_figures("hook Fine", {"my_count": 1.0})
    with pytest.raises(ValueError, match=r"^hook Later's log figure 'source_x'"):
        refuse_trainer_figures("hook Later", {"source_x": 1.0})
