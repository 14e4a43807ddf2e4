"""TensorBoard scalars: training logs, validation metrics, buffer figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from melissa_trainer.core.state import TrainerControl, TrainerState
from melissa_trainer.hooks.base import Hook

if TYPE_CHECKING:  # pragma: no cover
    from torch.utils.tensorboard import SummaryWriter

    from melissa_trainer.core.view import TrainerView


class TensorBoardHook(Hook):
    """Writes event files under `log_dir` from the main process.

    Tags: `train/<key>` for every logged figure (loss, learning_rate, samples_per_second,
    steps_per_second), `source/<key>` for the source's telemetry (messages, bytes,
    rejected, duplicates… for a network stream), `buffer/<key>` for the buffer figures
    and `buffer/reuse`, a
    histogram of how many times the samples that left this rank's buffer were drawn;
    `eval/<key>` for validation metrics. Written at log and validation time only, never
    per step; flushed at those points, closed at the end of training.
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.writer: SummaryWriter | None = None

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process and self.writer is None:
            from torch.utils.tensorboard import SummaryWriter  # heavy import: only when used

            self.writer = SummaryWriter(log_dir=self.log_dir)

    def on_log(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float],
    ) -> None:
        if self.writer is None:
            return
        step = state.global_step
        for key, value in logs.items():
            group, _, name = key.partition("_")
            if group not in ("buffer", "source", "serving"):
                group, name = "train", key
            self.writer.add_scalar(f"{group}/{name}", value, step)
        histogram = trainer.buffer.stats().reuse_histogram
        if histogram:
            draws = np.repeat(
                np.fromiter(histogram.keys(), dtype=np.int64),
                np.fromiter(histogram.values(), dtype=np.int64),
            )
            self.writer.add_histogram("buffer/reuse", draws, step)
        self.writer.flush()

    def on_validation_end(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        if self.writer is None:
            return
        for key, value in metrics.items():
            self.writer.add_scalar(f"eval/{key.removeprefix('eval_')}", value, state.global_step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
