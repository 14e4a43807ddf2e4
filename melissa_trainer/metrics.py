"""The figures the trainer reports: training logs (`LogFigures`, and `log`, which
`OnlineTrainer.log` delegates to) and validation (`evaluate`, which
`OnlineTrainer.evaluate` delegates to), each reduced over ranks so that every rank holds
the same.

The trainer adds each micro-batch's loss and sample count to `LogFigures` (the loss
stays on the device: no host sync per step); `reduce` turns them, with the buffer's and
the source's counters, into the logged dictionary (one all-reduce, two with the
source's study-wide figures), and starts afresh.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from accelerate.utils import send_to_device

from melissa_trainer.hooks import Event
from melissa_trainer.hooks.simulation_errors import SimulationErrors, per_sample_losses_available

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.buffers import Buffer
    from melissa_trainer.sources import Source
    from melissa_trainer.trainer import OnlineTrainer


class LogFigures:
    """The figures of this rank since the last log. Not thread-safe: the training thread.

    Attributes:
        loss_sum: sum of the micro-batch losses (a 0-d tensor on the training device).
        loss_count: micro-batches in `loss_sum`.
        samples: samples trained on.
        samples_totaled: of `samples`, those already added to
            `TrainerState.total_samples_seen` (by a checkpoint, see `take_untotaled`).
        steps: optimizer steps.
        started: `time.perf_counter()` when counting started (s).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.loss_sum = torch.zeros((), device=device)
        self.loss_count = 0
        self.samples = 0
        self.samples_totaled = 0
        self.steps = 0
        self.started = time.perf_counter()

    def restart(self) -> None:
        """Nothing counted from now on (the loss neither)."""
        self.loss_sum.zero_()
        self.loss_count = self.samples = self.samples_totaled = self.steps = 0
        self.started = time.perf_counter()

    def take_untotaled(self) -> int:
        """The samples not yet added to `total_samples_seen`, marked as added now."""
        untotaled = self.samples - self.samples_totaled
        self.samples_totaled = self.samples
        return untotaled

    def reduce(
        self, buffer: Buffer, source: Source, num_processes: int, distributed: bool, lr: float
    ) -> tuple[dict[str, float], int, int]:
        """The logs of these figures over all ranks, the samples of every rank not yet in
        `total_samples_seen`, and the micro-batches of every rank whose loss is in the
        logged mean (0: the loss is NaN); restarts. Collective when
        `distributed`.

        Every count is summed over ranks (`buffer_samples`, the samples the buffers
        hold now; `buffer_put`, `buffer_got`, `buffer_evicted`, since the last log);
        `buffer_fill` is `buffer_samples` over the ranks' total capacity; rates are per
        second of the mean rank's wall time. The source's telemetry is summed over
        ranks, but for its `study_keys` (figures every rank counts in full), whose
        maximum is logged.
        """
        stats = buffer.stats()
        elapsed = time.perf_counter() - self.started
        telemetry = source.telemetry()  # cumulative counters, the same keys on every rank
        names = sorted(k for k in telemetry if k not in source.study_keys)
        study_names = sorted(k for k in telemetry if k in source.study_keys)
        local = [0.0, self.loss_count, self.samples, self.take_untotaled(), len(buffer)]
        local += [stats.put, stats.got, stats.evicted, elapsed, *(telemetry[k] for k in names)]
        figures = torch.tensor(local, dtype=torch.float64, device=self.device)
        figures[0] = self.loss_sum
        maxima = torch.tensor(
            [telemetry[k] for k in study_names], dtype=torch.float64, device=self.device
        )
        if distributed:
            dist.all_reduce(figures)
            if study_names:
                dist.all_reduce(maxima, op=dist.ReduceOp.MAX)
        values = figures.tolist()
        loss_sum, loss_count, samples, new_total, size, put, got, evicted, elapsed_sum = values[:9]
        elapsed_mean = max(elapsed_sum / num_processes, 1e-9)
        source_figures = dict(zip(names, values[9:], strict=True))
        if study_names:  # (a read of the device: only when there is something to read)
            source_figures.update(zip(study_names, maxima.tolist(), strict=True))
        logs = {
            "loss": loss_sum / loss_count if loss_count else float("nan"),
            "learning_rate": lr,
            "samples_per_second": samples / elapsed_mean,
            "steps_per_second": self.steps / elapsed_mean,
            # every count is over all ranks, as put/got/evicted are (a per-rank mean
            # beside sums is what a two-rank log used to show, unlabelled)
            "buffer_samples": size,
            "buffer_fill": size / (num_processes * buffer.capacity),
            "buffer_put": put,
            "buffer_got": got,
            "buffer_evicted": evicted,
            **{f"source_{k}": source_figures[k] for k in sorted(source_figures)},
        }
        self.restart()
        return logs, int(new_total), int(loss_count)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of these figures: the loss since the last log, so that
        the first log after a resume reports what it would have without the restart."""
        return {"loss_sum": float(self.loss_sum), "loss_count": self.loss_count}

    @staticmethod
    def reshard_state(states: Sequence[Mapping[str, Any]], rank: int) -> dict[str, Any]:
        """Rank `rank`'s `state_dict()` after a resume on another number of ranks, from
        every old rank's (`states`, in rank order): new rank 0 holds the sum of the old
        ranks' loss sums and counts, the others none. The first log reduces them over
        ranks, so it reports the mean loss since the last log that it would have without
        the resize (the same sums; a float32 rounding apart); nothing is counted twice.
        Pure."""
        if rank != 0:
            return {"loss_sum": 0.0, "loss_count": 0}
        return {
            "loss_sum": math.fsum(float(s["loss_sum"]) for s in states),
            "loss_count": sum(int(s["loss_count"]) for s in states),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; the other figures start afresh (samples and steps
        before the checkpoint are counted by the checkpointed `TrainerState`)."""
        self.restart()
        self.loss_sum.fill_(float(state["loss_sum"]))
        self.loss_count = int(state["loss_count"])


def log(trainer: OnlineTrainer) -> dict[str, float]:
    """See `OnlineTrainer.log`: the figures since the last log reduced over ranks, into
    the state's history, and LOG fired. Collective."""
    state = trainer.state
    if trainer.lr_scheduler is not None:
        lr = float(trainer.lr_scheduler.get_last_lr()[0])
    else:
        lr = float(trainer.optimizer.param_groups[0]["lr"])
    logs, new_total, losses = trainer.log_figures.reduce(
        trainer.buffer,
        trainer.source,
        trainer.num_processes,
        trainer.stop_sync.distributed,
        lr,
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
        raise ValueError("evaluate() needs an eval_dataset")
    acc, state, control, args = trainer.accelerator, trainer.state, trainer.control, trainer.args
    trainer.hooks.fire(Event.VALIDATION_START, trainer, state, control)
    # per-simulation tails when the samples carry simulation ids (`hooks.simulation_errors`)
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
    trainer.model.train()
    if trainer.stop_sync.distributed:
        dist.all_reduce(sums)
    total, count = sums.tolist()
    metrics = {"eval_loss": total / count}
    if tails is not None:
        metrics.update(tails.metrics(trainer.stop_sync.distributed))
    state.record_metric(metrics, args.metric_for_best_model, args.greater_is_better)
    state.last_eval_step = state.global_step
    state.append_log(metrics)
    trainer.hooks.fire(Event.VALIDATION_END, trainer, state, control, metrics)
    return metrics
