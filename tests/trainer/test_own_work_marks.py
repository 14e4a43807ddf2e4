"""The trainer tells its source's starvation watch's clock when its training thread is
in work of its own (`ReadClock.work_began`): around every hook dispatch and every
action point (a log, a validation, a save, with their rank-0 parts), so that another
rank does not call a rank 0 there deadlocked (`study.starvation`). One process: the
marks are the training thread's, the same on every rank."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.sources.iterable import IterableSource
from melissa_trainer.stream.read_clock import ReadClock

pytestmark = pytest.mark.timeout(120)


class Watched(IterableSource):
    """A source with a starvation watch's clock (`starvation.reads`), as a stream's or
    a study's has."""

    def __init__(self, samples: list[dict[str, Any]]) -> None:
        super().__init__(samples)
        self.starvation = self  # (the watch: only its clock is read)
        self.reads = ReadClock()


class Seen(Hook):
    """What rank 0 would publish of its own work, read from inside its hooks and from
    inside an action point outside any hook dispatch (`log_figures`, read by the log)."""

    def __init__(self, reads: ReadClock) -> None:
        self.reads = reads
        self.seen: dict[str, list[bool]] = {"on_step_end": [], "log_figures": []}

    def _in_own_work(self, where: str) -> None:
        self.seen[where].append(self.reads.own_work(time.monotonic())["own_work_for"] is not None)

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self._in_own_work("on_step_end")

    def log_figures(self, trainer: Any) -> dict[str, float]:
        self._in_own_work("log_figures")
        return {}


def test_hooks_and_action_points_are_marked_as_the_training_threads_own_work(
    tmp_path: Path,
) -> None:
    source = Watched(list(linear_samples(64)))
    seen = Seen(source.reads)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        logging_steps=2, save_at_end=False, report_to="none",
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2), train_source=source,
        process_sample=xy, hooks=[seen],
    )  # fmt: skip
    assert trainer.hooks.work is None  # (set when the source starts)
    trainer.train()
    assert trainer.hooks.work is source.reads
    assert seen.seen["on_step_end"] and all(seen.seen["on_step_end"])
    assert seen.seen["log_figures"] and all(seen.seen["log_figures"])
    after = source.reads.own_work(time.monotonic())
    assert after["own_work_for"] is None and after["own_work_ago"] is not None
