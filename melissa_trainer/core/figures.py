"""The figures of a training log (`LogFigures`): each micro-batch's loss and sample count
added on the device (no host sync per step), and reduced over ranks once per logging
window with the buffer's and the source's counters, so that every rank holds the same
dictionary.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.buffers import Buffer
    from melissa_trainer.core.grad_norms import GradNorms
    from melissa_trainer.sources.source import Source


#: the figures of every log (`LogFigures.reduce`), which a hook's `log_figures` must not
#: use, nor a name starting with `SOURCE_PREFIX` (the source's telemetry)
TRAINER_FIGURES = frozenset(
    {
        "loss",
        "learning_rate",
        "samples_per_second",
        "steps_per_second",
        "buffer_samples",
        "buffer_fill",
        "buffer_put",
        "buffer_got",
        "buffer_evicted",
    }
)
SOURCE_PREFIX = "source_"


def refuse_trainer_figures(
    hook: str, keys: Collection[str], taken: Collection[str] = TRAINER_FIGURES
) -> None:
    """Raise ValueError if one of the figure `keys` of `hook` ("hook MyHook": its class)
    is one of the trainer's own (`taken`: by default `TRAINER_FIGURES`; or a log's keys)
    or starts with `SOURCE_PREFIX` (the source's telemetry, whatever it holds now),
    naming the hook, the figure and the names the trainer keeps; else nothing. (Checked
    at each log, when a hook's keys are known: calling a hook's `log_figures` earlier
    would run user code before it is ready.)"""
    clash = sorted(k for k in keys if k in taken or k.startswith(SOURCE_PREFIX))
    if clash:
        raise ValueError(
            f"{hook}'s log figure {clash[0]!r} is one of the trainer's own "
            f"({', '.join(sorted(TRAINER_FIGURES))}, and {SOURCE_PREFIX}* for the "
            "source's telemetry): give it another name in its log_figures"
        )


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
        grad_norms: the steps' gradient norms with ``max_grad_norm`` (the train step's,
            which adds to them), logged as their mean, ``grad_norm``; None: no clipping.
    """

    def __init__(self, device: torch.device, grad_norms: GradNorms | None = None) -> None:
        self.device = device
        self.grad_norms = grad_norms
        self.loss_sum = torch.zeros((), device=device)
        self.loss_count = 0
        self.samples = 0
        self.samples_totaled = 0
        self.steps = 0
        self.started = time.perf_counter()
        #: each rank's `buffer_put` at the last `reduce`, in rank order (their sum is
        #: the log's); empty before the first
        self.rank_puts: list[int] = []

    def restart(self) -> None:
        """Nothing counted from now on (the loss neither)."""
        self.loss_sum.zero_()
        self.loss_count = self.samples = self.samples_totaled = self.steps = 0
        if self.grad_norms is not None:
            self.grad_norms.restart()
        self.started = time.perf_counter()

    def take_untotaled(self) -> int:
        """The samples not yet added to `total_samples_seen`, marked as added now."""
        untotaled = self.samples - self.samples_totaled
        self.samples_totaled = self.samples
        return untotaled

    def reduce(
        self,
        buffer: Buffer,
        source: Source,
        num_processes: int,
        distributed: bool,
        lr: float,
        extra: Mapping[str, float] | None = None,
        extra_maxima: Collection[str] = (),
    ) -> tuple[dict[str, float], int, int]:
        """The logs of these figures over all ranks, the samples of every rank not yet in
        `total_samples_seen`, and the micro-batches of every rank whose loss is in the
        logged mean (0: the loss is NaN); restarts. Collective when
        `distributed`.

        Every count is summed over ranks (`buffer_samples`, the samples the buffers
        hold now; `buffer_put`, `buffer_got`, `buffer_evicted`, since the last log);
        `buffer_fill` is `buffer_samples` over the ranks' total capacity (each rank's
        `buffer_put` is kept in `rank_puts`, not logged); rates are per
        second of the mean rank's wall time. The source's telemetry is summed over
        ranks, but for its `study_keys` (figures every rank counts in full), whose
        maximum is logged. `extra` (the hooks' `log_figures`, the same keys on every
        rank) is summed likewise, but for its `extra_maxima`, and logged under its own
        names, after the trainer's.
        """
        stats = buffer.stats()
        elapsed = time.perf_counter() - self.started
        telemetry = source.telemetry()  # cumulative counters, the same keys on every rank
        names = sorted(k for k in telemetry if k not in source.study_keys)
        study_names = sorted(k for k in telemetry if k in source.study_keys)
        extra = extra or {}
        summed = sorted(k for k in extra if k not in extra_maxima)
        highest = sorted(k for k in extra if k in extra_maxima)
        local = [0.0, self.loss_count, self.samples, self.take_untotaled(), len(buffer)]
        local += [stats.put, stats.got, stats.evicted, elapsed, *(telemetry[k] for k in names)]
        local += [float(extra[k]) for k in summed]
        # each rank's put count in its own slot: the sum gives every rank's (no
        # collective of its own), for the end-of-run lines' per-rank figures
        ranks = [0.0] * num_processes
        ranks[dist.get_rank() if distributed else 0] = float(stats.put)
        local += ranks
        norms = self.grad_norms
        local += [0.0, norms.count] if norms is not None else []  # (the last two)
        figures = torch.tensor(local, dtype=torch.float64, device=self.device)
        figures[0] = self.loss_sum
        if norms is not None:  # read with the other figures: no read of its own
            figures[-2] = norms.sum
        maxima = torch.tensor(
            [*(telemetry[k] for k in study_names), *(float(extra[k]) for k in highest)],
            dtype=torch.float64,
            device=self.device,
        )
        if distributed:
            dist.all_reduce(figures)
            if study_names or highest:
                dist.all_reduce(maxima, op=dist.ReduceOp.MAX)
        values = figures.tolist()
        loss_sum, loss_count, samples, new_total, size, put, got, evicted, elapsed_sum = values[:9]
        elapsed_mean = max(elapsed_sum / num_processes, 1e-9)
        source_figures = dict(zip(names, values[9 : 9 + len(names)], strict=True))
        start = 9 + len(names)
        hook_figures = dict(zip(summed, values[start : start + len(summed)], strict=True))
        start += len(summed)
        self.rank_puts = [int(v) for v in values[start : start + num_processes]]
        # (the mean over the steps and ranks: every rank clips the same, synced, norm)
        norm_sum, norm_count = values[-2:] if norms is not None else (0.0, 0.0)
        if study_names or highest:  # (a read of the device: only when there is one to read)
            top = maxima.tolist()
            source_figures.update(zip(study_names, top[: len(study_names)], strict=True))
            hook_figures.update(zip(highest, top[len(study_names) :], strict=True))
        logs = {
            "loss": loss_sum / loss_count if loss_count else float("nan"),
            **({"grad_norm": norm_sum / norm_count} if norm_count else {}),
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
            **{f"{SOURCE_PREFIX}{k}": source_figures[k] for k in sorted(source_figures)},
        }
        # (`HookList.log_figures` refuses them, source_* too, naming the hook's class:
        # this, for any other caller's figures, knows no hook)
        refuse_trainer_figures("a hook", hook_figures, logs)
        logs.update((key, hook_figures[key]) for key in sorted(hook_figures))
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
