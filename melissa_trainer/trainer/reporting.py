"""What the trainer reports: its training logs (`log`, which `OnlineTrainer.log`
delegates to; the figures are `core.figures.LogFigures`) and validation (`evaluate`,
which `OnlineTrainer.evaluate` delegates to), each reduced over ranks so that every rank
holds the same.

Each reduction is watched (`core.wait_watch`, the trainer's one watch `StopSync.watch`,
on every rank when several train): a rank held there for long by another (stopped, hung,
still waiting for its data) warns, naming the collective, instead of waiting silently
until the process group's timeout. The watched block ends with the read of the result:
on a GPU the host waits there, not in the all-reduce's call.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from accelerate.utils import send_to_device

from melissa_trainer.core.wait_words import EVAL_USUAL, STEPS_USUAL
from melissa_trainer.hooks import Event
from melissa_trainer.trainer.held_out import HELD_OUT_FILE, HeldOutLosses, parameter_names
from melissa_trainer.trainer.simulation_errors import SimulationErrors, per_sample_losses_available

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

logger = logging.getLogger(__name__)


def log(trainer: OnlineTrainer) -> dict[str, float]:
    """See `OnlineTrainer.log`: the figures since the last log reduced over ranks, into
    the state's history, and LOG fired. Collective."""
    state = trainer.state
    if trainer.lr_scheduler is not None:
        lr = float(trainer.lr_scheduler.get_last_lr()[0])
    else:
        lr = float(trainer.optimizer.param_groups[0]["lr"])
    extra, extra_maxima = trainer.hooks.log_figures(trainer)
    with watched(trainer, f"step {state.global_step}'s log (the all-reduce of its figures)"):
        logs, new_total, losses = trainer.log_figures.reduce(
            trainer.buffer,
            trainer.source,
            trainer.num_processes,
            trainer.stop_sync.distributed,
            lr,
            extra,
            extra_maxima,
        )
    state.total_samples_seen += new_total
    state.last_log_step = state.global_step
    if losses:
        state.last_loss = logs["loss"]
    state.append_log(logs)
    trainer.hooks.fire(Event.LOG, trainer, state, trainer.control, logs)
    return logs


def evaluate(trainer: OnlineTrainer) -> dict[str, float]:
    """See `OnlineTrainer.evaluate`: each rank evaluates every `num_processes`-th sample
    of `eval_dataset` from its index (eval mode, no gradients, the accelerator's
    autocast), and the sums are all-reduced. Collective."""
    if trainer.eval_dataset is None:
        raise ValueError(
            "evaluate() needs an eval_dataset: pass OnlineTrainer(..., eval_dataset=...)"
        )
    acc, state, control, args = trainer.accelerator, trainer.state, trainer.control, trainer.args
    trainer.hooks.fire(Event.VALIDATION_START, trainer, state, control)
    # per-simulation tails when the samples carry simulation ids (`trainer.simulation_errors`)
    tails = SimulationErrors.of(trainer.eval_dataset, acc.device)
    if tails is not None and not per_sample_losses_available(trainer):
        tails = None
    mine = range(acc.process_index, len(trainer.eval_dataset), acc.num_processes)
    sums = torch.zeros(2, dtype=torch.float64, device=acc.device)
    move = acc.device.type != "cpu"
    trainer.model.eval()
    with torch.no_grad():
        for start in range(0, len(mine), args.batch_size):
            positions = mine[start : start + args.batch_size]
            samples = [trainer.eval_dataset[i] for i in positions]
            batch = trainer.dataset.collate_samples(samples)
            if move:
                batch = send_to_device(batch, acc.device)
            with acc.autocast():
                if tails is None:
                    loss = trainer.compute_loss(trainer.model, batch)
                else:  # the same forward pass; the mean is the batch's loss
                    losses = trainer.compute_sample_losses(trainer.model, batch)
                    tails.add(positions, losses)
                    loss = losses.mean()
            sums[0] += loss.double() * len(samples)
            sums[1] += len(samples)
    at = f"step {state.global_step}'s validation"
    with watched(trainer, f"{at} (the all-reduce of eval_loss)", EVAL_USUAL):
        if trainer.stop_sync.distributed:
            dist.all_reduce(sums)
        total, count = sums.tolist()
    metrics = {"eval_loss": total / count}
    if tails is not None:
        with watched(trainer, f"{at} (the all-reduce of the per-simulation tails)", EVAL_USUAL):
            metrics.update(tails.metrics(trainer.stop_sync.distributed))
        keep_held_out(trainer, tails)
    with torch.no_grad():  # the hooks' metrics, before anything reads them (eval mode)
        trainer.hooks.eval_figures(trainer, metrics)
    trainer.model.train()
    state.record_metric(metrics, args.metric_for_best_model, args.greater_is_better)
    state.last_eval_step = state.global_step
    state.append_log(metrics)
    trainer.hooks.fire(Event.VALIDATION_END, trainer, state, control, metrics)
    return metrics


def keep_held_out(trainer: OnlineTrainer, tails: SimulationErrors) -> None:
    """Set `trainer.held_out_losses` from the reduced `tails` (every rank alike) and, on
    the main process, rewrite ``{output_dir}/held_out_losses.csv``
    (`melissa_trainer.trainer.held_out`); a file it cannot write is a WARNING naming it
    and the error, not the end of a long training."""
    assert trainer.eval_dataset is not None  # (evaluate's caller checked)
    held_out = HeldOutLosses.of(
        trainer.state.global_step,
        tails.ids,
        tails.means,
        [trainer.eval_dataset[p] for p in tails.first],
        parameter_names(trainer.source),
    )
    trainer.held_out_losses = held_out
    if trainer.is_main_process:
        path = Path(trainer.args.output_dir) / HELD_OUT_FILE
        try:
            held_out.write(path)
        except OSError as error:  # a report beside the run: said, not a stop of training
            logger.warning(
                "could not write the held-out losses to %s (%s): this validation's are in "
                "trainer.held_out_losses; training goes on",
                path,
                error,
            )


def watched(
    trainer: OnlineTrainer, at: str, usual: str = STEPS_USUAL
) -> AbstractContextManager[None]:
    """The trainer's wait watch (`StopSync.watch`) around the collective `at` (what a
    long wait there waits for: "the other ranks at `at`"), `usual` its usual cause; no
    watch in a single process (no collective: every rank watches alike)."""
    if not trainer.stop_sync.distributed:
        return nullcontext()
    return trainer.stop_sync.watch.waiting(f"the other ranks at {at}", usual)
