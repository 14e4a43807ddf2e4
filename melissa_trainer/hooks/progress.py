"""Console logs and the tqdm progress bar, and the logging cadence.

`ProgressHook` requests logs every `logging_steps` steps on every rank (the reduction
of the logged figures is collective) and prints them on the main process only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from melissa_trainer.hooks.base import Hook
from melissa_trainer.state import TrainerControl, TrainerState

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer import OnlineTrainer

logger = logging.getLogger("melissa_trainer")


def format_logs(step: int, logs: dict[str, float]) -> str:
    """One human-readable line: `step 100 | loss 0.0123 | lr 1e-03 | …`.

    The source's counters (`source_*`, dozens of them, mostly rejection reasons) are
    shown only when non-zero, without the prefix; every figure still goes to
    TensorBoard."""
    parts = [f"step {step}"]
    for key, value in logs.items():
        if key.startswith("source_"):
            if not value:
                continue
            key = key[len("source_") :]
        short = key.replace("learning_rate", "lr").replace("samples_per_second", "samples/s")
        parts.append(f"{short} {value:.4g}")
    return " | ".join(parts)


class ProgressHook(Hook):
    """Requests logs every `logging_steps` steps and at the end; shows them on rank 0.

    With the bar enabled, a tqdm bar advances every step (total = `max_steps`, or open
    ended) and shows the latest loss, samples/s and buffer fill; log lines are written
    above it. With `disable_bar`, log lines go to the `melissa_trainer` logger and to
    standard output.
    """

    def __init__(self, logging_steps: int, disable_bar: bool = False) -> None:
        if logging_steps < 1:
            raise ValueError(f"logging_steps must be >= 1, got {logging_steps}")
        self.logging_steps = logging_steps
        self.disable_bar = disable_bar
        self._bar: tqdm | None = None
        self._last_logged = 0

    def _print(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line, flush=True)
            logger.debug(line)

    def on_train_start(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        self._last_logged = state.global_step
        if trainer.is_main_process and not self.disable_bar:
            self._bar = tqdm(
                total=state.max_steps,
                initial=state.global_step,
                unit="step",
                dynamic_ncols=True,
                desc="training",
            )

    def on_step_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if self._bar is not None:
            self._bar.update()
        if state.global_step % self.logging_steps == 0:
            control.should_log = True

    def on_log(
        self,
        trainer: OnlineTrainer,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float],
    ) -> None:
        self._last_logged = state.global_step
        if not trainer.is_main_process:
            return
        if self._bar is not None:
            self._bar.set_postfix(
                loss=f"{logs['loss']:.4g}",
                samples_s=f"{logs['samples_per_second']:.0f}",
                buffer=f"{logs['buffer_fill']:.0%}",
                refresh=False,
            )
        self._print(format_logs(state.global_step, logs))

    def on_validation_end(
        self,
        trainer: OnlineTrainer,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        if trainer.is_main_process:
            self._print(format_logs(state.global_step, metrics))

    def on_end_of_stream(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process:
            self._print(
                f"step {state.global_step} | end of stream (pseudo-epoch {state.pseudo_epoch})"
            )

    def on_loop_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if state.global_step > self._last_logged:
            control.should_log = True

    def on_save(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        if trainer.is_main_process:
            self._print(f"step {state.global_step} | checkpoint {path}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
