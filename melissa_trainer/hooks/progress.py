"""Console logs and the tqdm progress bar.

`ProgressHook` renders only: it shows the logs that `on_log` hands it (when to log is
`FlowHook`'s decision) on the main process, and at the end of training how often each
sample was trained on (`hooks.reuse`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from melissa_trainer.buffers.config import resolve_sample_to_insert_ratio
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.figures import SOURCE_PREFIX
from melissa_trainer.core.state import TrainerState
from melissa_trainer.core.train_on import train_on_advice
from melissa_trainer.hooks.hook import Hook
from melissa_trainer.hooks.reuse import data_limited, reuse_report

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

logger = logging.getLogger("melissa_trainer")


def format_logs(step: int, logs: dict[str, float]) -> str:
    """One human-readable line: `step 100 | loss 0.0123 | lr 1e-03 | …`.

    The source's counters (`source_*`, dozens of them, mostly rejection reasons) are
    shown only when non-zero (`zero_source_figure`), without the prefix; TensorBoard
    writes each from its first non-zero value on. Whole numbers (counts) are shown in
    full, the others to 4 significant digits."""
    parts = [f"step {step}"]
    for key, value in logs.items():
        if zero_source_figure(key, value):
            continue
        key = key.removeprefix(SOURCE_PREFIX)
        short = key.replace("learning_rate", "lr").replace("samples_per_second", "samples/s")
        parts.append(f"{short} {_figure(value)}")
    return " | ".join(parts)


def zero_source_figure(key: str, value: float) -> bool:
    """Whether `key` is one of the source's counters (``source_*``) and `value` is 0: the
    console leaves these out, TensorBoard writes a counter from its first non-zero value
    on (`TensorBoardHook`); most are rejection reasons, 0 in a healthy run."""
    return key.startswith(SOURCE_PREFIX) and not value


#: whole numbers up to this are printed in full (counts: samples, messages, bytes)
_EXACT_UP_TO = 10**15


def _figure(value: float) -> str:
    """A count (a whole number) in full, so that `samples_put` can be checked against
    simulations x time steps at any size; any other figure to 4 significant digits."""
    if float(value).is_integer() and abs(value) < _EXACT_UP_TO:
        return str(int(value))
    return f"{value:.4g}"


class _AboveTheBar(logging.Handler):
    """Writes the `melissa_trainer` logger's WARNINGs above the bar (`tqdm.write`), as
    Python's last-resort handler would have written them to standard error: without
    it, a warning (a slow start-up, a simulation killed) was glued to the end of the
    bar's line. Installed only where no handler was configured (`ProgressHook`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)  # the last resort's level

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # logging's contract: report, never raise into the caller
            self.handleError(record)


class ProgressHook(Hook):
    """Shows the training logs, validation metrics, checkpoints written and the one
    resumed from, on the main process; after a resume, at SOURCE_STARTED, the source's
    `resume_report` lines if it has any (a `Study`: which simulations are done, which
    run again).

    With the bar enabled, a tqdm bar advances every step (total = `max_steps`, or open
    ended) and shows the latest loss, samples/s and buffer fill; log lines are written
    above it, and so are the `melissa_trainer` logger's warnings while no logging
    handler is configured (Python's default then prints them to standard error, which
    would end the bar's line with them). The bar is drawn only where standard error is
    a terminal (or in a notebook, as a widget): tqdm's ``disable=None``. Where it is a
    file or a pipe (a batch job's log, ``> run.log 2>&1``) no bar is drawn, as with
    `disable_bar`: its redraws, one a step, each behind a carriage return, flooded such
    a log. Without a bar, log lines go to the `melissa_trainer` logger and to standard
    output.

    At the end of training it prints the source's `account_report` lines if it has any (a
    `Study`: what its simulations contributed, what an adaptive sampler drew).

    At the end of training (`on_train_end`, after the final log) it shows how often each
    sample was trained on, on average over all ranks (with each rank's inserted samples,
    `LogFigures.rank_puts`, where they differ), and logs a WARNING naming the
    options to change when a run ended with its stream after about one use per sample
    (see `hooks.reuse.reuse_report`), or "more simulations, not more reuse" when its
    validation stopped improving while the training loss kept falling
    (`hooks.reuse.data_limited`).
    """

    def __init__(self, disable_bar: bool = False) -> None:
        self.disable_bar = disable_bar
        self._bar: tqdm | None = None
        self._handler: _AboveTheBar | None = None
        # the real path of the checkpoint this run last wrote or resumed from
        self._saved: str | None = None

    def _print(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line, flush=True)
            logger.debug(line)

    def on_load(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        # A resumed run looks like a fresh one but for the bar's first count, and the
        # trainer's own "resumed from" line is INFO, which Python's default logging hides.
        # (A save of this step later rewrites the checkpoint resumed from: `on_save`.)
        self._saved = os.path.realpath(path)
        if trainer.is_main_process:
            self._print(f"step {state.global_step} | resumed from {path}")

    def on_source_started(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        # A resumed study says which simulations are done and which run again (a source
        # that has such a report: `Study.resume_report`, rank 0's).
        if trainer.is_main_process:
            for line in getattr(trainer.source, "resume_report", ()):
                self._print(f"step {state.global_step} | {line}")

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process and not self.disable_bar:
            bar = tqdm(
                total=state.max_steps,
                initial=state.global_step,
                unit="step",
                dynamic_ncols=True,
                desc="training",
                # tqdm's own rule: no bar where its stream (standard error) is not a
                # terminal; a notebook's widget is drawn all the same. A user trial's log
                # (``> run.log 2>&1``) held a redraw per step, each a carriage return
                disable=None,
            )
            if bar.disable:  # (a file or a pipe: the log lines alone, as printed)
                bar.close()
                return
            self._bar = bar
            if not logger.hasHandlers():  # (a user's configuration is left as it is)
                self._handler = _AboveTheBar()
                logger.addHandler(self._handler)

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if self._bar is not None:
            self._bar.update()

    def on_log(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float],
    ) -> None:
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
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        if trainer.is_main_process:
            self._print(format_logs(state.global_step, metrics))

    def on_end_of_stream(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.is_main_process:
            self._print(
                f"step {state.global_step} | end of stream (pseudo-epoch {state.pseudo_epoch})"
            )

    def on_pseudo_epoch_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        # A replay with nothing in the buffer trains on nothing: said, not silent (a
        # fifo/firo run resumed with --pseudo_epochs after one that kept nothing).
        if trainer.is_main_process and len(trainer.buffer) == 0:
            logger.warning(
                "pseudo-epoch %d: the main rank's buffer holds no sample to replay, so "
                "the replay trains on nothing (a fifo/firo buffer keeps what it serves "
                "only in a run with --pseudo_epochs 2 or more from the start)",
                state.pseudo_epoch,
            )

    def on_save(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        # A checkpoint of this step written again: the end's (or a preemption's) rewrite
        # of a periodic save of the run's last step, or of the checkpoint it resumed from
        # (`on_load`), which lacked what came since (a study's last simulations' ends,
        # samples received: `trainer.end_save`). Said, or the same line twice reads as a
        # checkpoint written twice by mistake. (Real paths: the resumed one is named as
        # the user gave it, maybe relative.)
        real = os.path.realpath(path)
        again = real == self._saved
        self._saved = real
        if trainer.is_main_process:
            # (what came since is not known here: a mere second save of an unchanged
            # step, `save_checkpoint()` called again, rewrites it too; said so, never
            # "its first write lacked ...", which that is not)
            note = (
                " (rewritten: replaces this step's earlier write, with whatever came "
                "since it: simulations ended, samples received)"
                if again
                else ""
            )
            self._print(f"step {state.global_step} | checkpoint {path}{note}")

    def on_train_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        args = trainer.args
        # (after a preemption, "stopped by SIGTERM" or "stopped because the launcher
        # (...) is gone": the trainer's own next line says how to resume)
        ended = trainer.ended_by
        if not ended.startswith("stopped"):  # (end of stream, max_steps: the run's end)
            ended = f"end of training ({ended})" if ended else "end of training"
        report = (
            reuse_report(
                state,
                args.watermark,
                trainer.num_processes,
                ended,
                resolve_sample_to_insert_ratio(
                    args.buffer, args.sample_to_insert_ratio, args.max_sample_reuse
                ),
                args.batch_size,
                args.buffer_config().resolved_tolerance,
                trainer.log_figures.rank_puts,
            )
            if trainer.is_main_process
            else None
        )
        if report is None:
            return
        line, warning = report
        if "end of stream, before max_steps" in ended:  # (a larger max_steps cannot help)
            advice = train_on_advice(trainer.buffer, state.pseudo_epoch + 1)
            line += f"; to train on past the stream's end: {advice}"
        self.close()  # the bar is done: the summary goes below it
        for account in getattr(trainer.source, "account_report", ()):
            self._print(account)
        self._print(line)
        if warning is not None:
            logger.warning("%s", warning)
        diagnosis = data_limited(state, args.metric_for_best_model, args.greater_is_better)
        if diagnosis is not None:
            logger.warning("%s", diagnosis)

    def close(self) -> None:
        if self._handler is not None:
            logger.removeHandler(self._handler)
            self._handler = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None
