"""TensorBoard scalars: training logs, validation metrics, buffer figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.figures import SOURCE_PREFIX
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook
from melissa_trainer.hooks.progress import zero_source_figure

if TYPE_CHECKING:  # pragma: no cover
    from torch.utils.tensorboard import SummaryWriter

    from melissa_trainer.core.view import TrainerView


class TensorBoardHook(Hook):
    """Writes event files under `log_dir` from the main process.

    Tags: `train/<key>` for every logged figure (loss, learning_rate, samples_per_second,
    steps_per_second), `source/<key>` for the source's telemetry (messages, bytes,
    rejected, duplicates… for a network stream; each from its first non-zero value on,
    also after a resume: dozens are rejection reasons that stay 0 in a healthy run,
    which the console leaves out by the same rule, `progress.zero_source_figure`),
    `buffer/<key>` for the buffer figures and `buffer/reuse`, a histogram of how many
    times the samples that left this rank's buffer were drawn; `eval/<key>` for
    validation metrics. Written at log and validation time only, never per step;
    flushed at those points, closed at the end of training.

    After a resume from checkpoint-STEP, the new event file starts with a restart at
    STEP + 1 (`_restarted_writer`): TensorBoard's readers (their default
    ``purge_orphaned_data``) hide the points the stopped run wrote after that checkpoint,
    which this run computes again, so each step has one point, this run's, not two.
    """

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.writer: SummaryWriter | None = None
        self._resumed_at: int | None = None  # the step of the checkpoint resumed from
        self._source_written: set[str] = set()  # the source's counters written so far

    def on_load(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self._resumed_at = state.global_step

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process and self.writer is None:
            from torch.utils.tensorboard import SummaryWriter  # heavy import: only when used

            if self._resumed_at is None:
                self.writer = SummaryWriter(log_dir=self.log_dir)
            else:
                self.writer = _restarted_writer(self.log_dir, self._resumed_at + 1)

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
            if key not in self._source_written and zero_source_figure(key, value):
                continue  # not yet non-zero: a tag that stays 0 would clutter the board
            if key.startswith(SOURCE_PREFIX):
                self._source_written.add(key)
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


def _restarted_writer(log_dir: str, step: int) -> SummaryWriter:
    """A writer whose file tells TensorBoard that the run restarted at `step`.

    TensorBoard's readers take the first session start (``SessionLog.START``) they read
    in a run for its start, and every later one for a restart, hiding the points of the
    files read before whose step is at least its step. A run's first file (a fresh
    run's) holds none, so this file holds two at `step`: the first counts as the run's
    start, the second as the restart. (A start in the fresh run's file instead, at step
    0, would hide every point if that file sorted after this one: files sort by name,
    a timestamp in seconds and then a pid.) Nothing is written before them, so the
    restart hides only the stopped run's points.
    """
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=log_dir, purge_step=step)  # file version, one start
    file_writer = writer.file_writer
    assert file_writer is not None  # made by the constructor
    file_writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
    return writer
