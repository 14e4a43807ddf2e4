"""The end-of-run line on sample reuse, and the warning when a run trained once.

Online training that uses each sample once ends with a model fitted by one pass over
the data: a study of 20 short simulations then takes a few dozen steps. Nothing in the
loss curve says so, so the end of every run says how often each sample was trained on
(samples trained on / samples inserted, all ranks: the trainer's count and the final
log's buffer counter), and warns, naming
the options that change it, when a run ended with its stream after about one use per
sample. `ProgressHook` shows both; this module only composes them.

The opposite case has its own diagnosis (`data_limited`): validation stopped improving
while the training loss kept falling. The model is then fitting the samples it has, and
more reuse (a higher ratio, more pseudo-epochs) makes it worse; the study is limited by
its data, and the advice is more simulations, not more reuse. Not when the run stopped
before its stream ended (its data had not all arrived: the advice is to let it arrive),
and never when a loss grew far above its best (`hooks.divergence.diverged`: the
optimisation diverged, the advice is the learning rate), whatever the rest of the
history: a user's early-stopped run was told "more simulations" with 174 of its 480
samples in and its validation loss up 23-fold at a learning rate of 2e-2 (htrial16);
one with no training loss logged before its best validation (the default
--logging_steps 50 against --eval_steps 10) was told nothing (htrial17).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from melissa_trainer.core.figures import SOURCE_PREFIX
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.divergence import diverged
from melissa_trainer.hooks.reuse_shares import Shares

__all__ = [
    "DATA_LIMITED_DROP",
    "DATA_LIMITED_VALIDATIONS",
    "data_limited",
    "reuse_report",
]

#: a run that ends with its stream below this mean reuse is warned about
REUSE_WARNING_BELOW = 1.5
#: `data_limited`: validations after the best one, none better...
DATA_LIMITED_VALIDATIONS = 2
#: ... while the training loss fell below this share of its value at the best one
DATA_LIMITED_DROP = 0.8


def data_limited(
    state: TrainerState, metric: str = "eval_loss", greater_is_better: bool = False
) -> str | None:
    """The warning for a run whose optimisation diverged, or whose validation stopped
    improving while its training loss kept falling, else None; from
    `state.log_history` (validation entries and training logs' ``loss``, each the
    mean over its logging window) and `state.stream_ended`. (The history keeps the last
    `TrainerState.LOG_HISTORY_LEN` entries: a long run is judged on its end.)
    "Improving" is judged on `metric` in the direction `greater_is_better` (the run's
    `metric_for_best_model`, ``eval_`` prefixed when the history has it so, as
    `TrainerState.record_metric` reads it): a run judged on its own metric is told
    what that metric did, not ``eval_loss`` (trial 37).

    Divergence first, whatever else the history holds (`hooks.divergence.diverged`,
    its rule): the last ``eval_loss`` at least `divergence.DIVERGED_GROWTH` times a positive best
    one, the training loss's smoothed level that many times its lowest, or its last
    log or two jumped beyond the history's spread, unless the
    validation or the learning rate says otherwise: the advice is to lower the learning
    rate, or clip the gradients. (It needs no
    training loss logged near the best validation: an early-stopped run with the
    default --logging_steps 50 and --eval_steps 10 has none, and got no advice at all,
    htrial17.)

    Else the data-limited diagnosis, given when the best `metric` was followed by
    at least `DATA_LIMITED_VALIDATIONS` validations, none better, and the last training
    loss logged is below `DATA_LIMITED_DROP` times the last one logged at or before the
    best validation's step; its advice:

    - the run stopped before its stream ended (`state.stream_ended` false: an early
      stop or `max_steps`): its data had not all arrived, so nothing says the study
      needs more simulations: let more of it arrive before judging;
    - else the study is limited by its data: more simulations, not more reuse.

    Only the last says "limited by its data".
    """
    history = state.log_history
    divergence = diverged(history)
    if divergence is not None:
        return divergence
    if not any(metric in e for e in history) and any(f"eval_{metric}" in e for e in history):
        metric = f"eval_{metric}"
    evals = [(e["step"], e[metric]) for e in history if metric in e and math.isfinite(e[metric])]
    losses = [(e["step"], e["loss"]) for e in history if "loss" in e and "eval_loss" not in e]
    if len(evals) < DATA_LIMITED_VALIDATIONS + 1 or not losses:
        return None
    sign = -1.0 if greater_is_better else 1.0
    # (the first best, as `record_metric` keeps it: a tie is no improvement)
    best = min(range(len(evals)), key=lambda i: sign * evals[i][1])
    after = len(evals) - 1 - best
    if after < DATA_LIMITED_VALIDATIONS:
        return None
    best_step, best_eval = evals[best]
    before = [loss for step, loss in losses if step <= best_step]
    if not before:
        return None
    then, last = before[-1], losses[-1][1]
    if not last < DATA_LIMITED_DROP * then:
        return None
    fitting = (
        f"validation stopped improving at step {best_step:.0f} ({metric} {best_eval:.4g}, "
        f"none better in the {after} validations since) while the training loss kept "
        f"falling ({then:.4g} -> {last:.4g}): the model is fitting the samples it has. "
    )
    if not state.stream_ended:
        put = next((e["buffer_put"] for e in reversed(history) if "buffer_put" in e), None)
        inserted = "" if put is None else f", with {put:.0f} samples inserted (all ranks)"
        return fitting + (
            f"But the run stopped before its stream ended{inserted}: its data had not all "
            "arrived, so this does not show that the study needs more simulations. Let "
            "more of it arrive before judging (a larger --early_stopping_patience or "
            "--max_steps), or reuse each sample less while it streams (a lower "
            "--sample_to_insert_ratio)"
        )
    return fitting + (
        "The study is limited by its data: more simulations (the launcher's "
        "n_simulations), not more reuse (a higher --sample_to_insert_ratio or more "
        "--pseudo_epochs fit the same samples harder)"
    )


def reuse_report(
    state: TrainerState,
    watermark: int | None = None,
    num_processes: int = 1,
    ended: str = "end of training",
    ratio: float | None = None,
    batch_size: int | None = None,
    tolerance: float | None = None,
    rank_puts: Sequence[int] = (),
) -> tuple[str, str | None] | None:
    """(the end-of-run line, the warning or None), from the last training log in
    `state.log_history`; None when there is none or nothing was inserted.

    `watermark` (the buffer's, per rank) and `num_processes`: when the whole stream
    held fewer than ``watermark`` samples per rank on average, the warning names the
    watermark as the cause (reads waited until the stream ended, then the buffer drained
    each sample once, whatever the buffer and its ratio), since the usual advice (a
    reservoir with a ratio) changes nothing then. `ratio`: the sample-to-insert ratio of
    the run's reservoir (None: FIFO, FIRO, or no rate limit): a run warned about although
    a ratio >= `REUSE_WARNING_BELOW` was in effect is not told to set one either: its
    training waited for the watermark through most of a stream that ended soon after
    (the watermark is then a large share of each rank's stream), and that is named.

    `batch_size` (per rank) and `tolerance` (the rate limiter's, in samples): a read
    waits for ``max(batch_size, watermark)`` held samples, so a stream of fewer samples
    per rank than a batch trains only on its end-of-stream drain: that is named as the
    batch's doing, not the watermark's. And a ratio's draws trail ``ratio x inserts``
    by up to the tolerance (at least ``ratio x (batch_size - watermark)``: a first read
    needs that many inserts before any draw), so a run whose stream ends there draws
    each sample about ``ratio x (1 - batch_size / samples per rank)`` times; a run that
    ended with its stream below half its ratio (`_short_of_ratio`), with the batch as
    the larger term of the tolerance, is warned about too, naming the batch.

    The mean reuse is ``state.total_samples_seen / buffer_put`` of the last log
    (samples trained on / samples inserted, summed over ranks, replays of pseudo-epochs
    included). The samples trained on are not always the draws (``buffer_got``): the
    line then gives both, and why (`_draws_apart`; a two-rank run once said "after 130
    steps on 4146 samples" in one line and "4130 draws" in the next, unexplained). The
    warning is given when it is below `REUSE_WARNING_BELOW` and the run ended because
    the data ran out (`state.stream_ended`), not at `max_steps`, by a hook's stop or by
    preemption: those runs chose their length. `ended` says how the run ended, at the
    head of the line (a preempted run is not at its end: the progress hook says so).
    When the receivers refused samples holding NaN or Inf (the log's
    ``source_nonfinite_refused``), the warning says so first (`_refused_first`).

    `rank_puts`: each rank's inserted samples at that log, in rank order
    (`LogFigures.rank_puts`). Every step waits for every rank, so the rank that received
    the fewest bounds the run: the batch's and the watermark's causes are judged on its
    figure, and the warning gives each rank's (`hooks.reuse_shares.Shares`). Without
    them (or when they do not add up to the log's ``buffer_put``), under several ranks
    the mean is used and said to be one: a user trial read "20 per rank" of ranks that
    took 30 and 11.
    """
    last = next((logs for logs in reversed(state.log_history) if "buffer_put" in logs), None)
    if last is None or last["buffer_put"] <= 0:
        return None
    put, got, trained = last["buffer_put"], last["buffer_got"], state.total_samples_seen
    reuse = trained / put
    line = (
        f"step {state.global_step} | {ended}: each sample trained on {reuse:.1f} "
        f"times on average ({trained} samples trained on, of {put:.0f} inserted, all ranks"
    )
    shares = Shares(put, num_processes, rank_puts)
    if shares.listing:  # (the ranks' figures differ: each is said)
        line += f": {shares.each}"
    if trained != round(got):
        line += _draws_apart(trained, round(got), num_processes)
    line += ")"
    short = _short_of_ratio(reuse, ratio, batch_size, watermark)
    if not state.stream_ended or (reuse >= REUSE_WARNING_BELOW and not short):
        return line, None
    warning = (
        f"training ended with the stream after {state.global_step} steps"
        + (
            _refused_first(last.get(f"{SOURCE_PREFIX}nonfinite_refused", 0.0), put, reuse)
            or f", having used each sample {reuse:.1f} times on average"
        )
        + ": the model may be far from trained. "
    )
    low = shares.low
    if batch_size is not None and batch_size > (watermark or 1) and low < batch_size:
        # a read waits for a whole batch: none was served before the stream ended
        return line, warning + (
            f"A read of --batch_size {batch_size} waits until a rank's buffer holds "
            f"{batch_size} samples, more than the {low:.0f} the stream brought "
            f"{shares.who} ({shares.listing}{put:.0f} in all): no batch was served "
            "until the stream ended, and training was its end-of-stream drain, each "
            "sample once. " + _batch_advice(low, ratio)
        )
    if short and ratio is not None and batch_size is not None:
        slack = f"{tolerance:g} samples, " if tolerance is not None else ""
        return line, warning + (
            f"A reservoir drawing each sample {ratio:g} times was in effect, but a first "
            f"read of --batch_size {batch_size} needs {batch_size} inserts before any "
            f"draw, so its rate limiter lets the draws trail {ratio:g} x the inserts by "
            f"up to its tolerance ({slack}at least {ratio:g} x (batch_size - watermark)), "
            f"against {ratio * low:.0f} draws for the {low:.0f} samples "
            f"{shares.received}, and the stream ended before the draws caught up. "
            + _batch_advice(low, ratio)
        )
    if watermark is not None and low < watermark:
        # no read is served below the watermark until the stream ends (and every step
        # waits for every rank): the whole run was the end-of-stream drain, one draw per
        # sample, whatever the ratio
        return line, warning + (
            f"The stream ({put:.0f} samples, {shares.each}) never filled "
            f"{shares.buffer} to --watermark {watermark}, so training only started "
            "when it ended: lower --watermark (well below the samples each rank "
            "receives)"
        )
    # (a rank that received nothing has no share to state: the general advice)
    if ratio is not None and ratio >= REUSE_WARNING_BELOW and watermark is not None and low:
        return line, warning + (
            f"A reservoir drawing each sample up to {ratio:g} times was in effect, but "
            f"training waited until each rank's buffer held --watermark {watermark} "
            f"samples, {watermark / low:.0%} of the {low:.0f} {shares.received}, "
            "and the stream ended soon after: lower --watermark (well below the samples "
            "each rank receives), or stream more data per rank"
        )
    warning += (
        "Train on each sample several times: --buffer reservoir --sample_to_insert_ratio N "
        "(N draws per sample inserted; the default buffer), or replay the data after the "
        "stream with --pseudo_epochs N"
    )
    return line, warning


def _refused_first(refused: float, put: float, reuse: float) -> str:
    """The reuse warning's first words when the stream's receivers refused samples
    holding NaN or Inf (`refused`, all ranks; `put`, the samples inserted, each used
    `reuse` times): their count and share, and that the solver is the cause, before any
    training setting (a user trial's warning, 60 of 80 samples refused, named only the
    batch size). "" if none."""
    if refused <= 0:
        return ""
    received = refused + put
    return (
        f", and {refused:.0f} of the {received:.0f} samples received "
        f"({refused / received:.0%}) were refused for holding NaN or Inf "
        "(nonfinite_refused): the solver's output is the first cause, not the training "
        "settings. Fix its blow-up (the receiver's log, and a study's account, name the "
        "simulations and time steps), or narrow the sampler's bounds. Then, on the "
        f"{put:.0f} samples left, training used each {reuse:.1f} times on average"
    )


def _short_of_ratio(
    reuse: float, ratio: float | None, batch_size: int | None, watermark: int | None
) -> bool:
    """Whether a run's mean `reuse` fell below half its `ratio` with the batch as the
    larger term of the limiter's default tolerance (``ratio x (batch_size - watermark)``
    against ``ratio x watermark + batch_size``): the batch's doing. (A watermark's is
    warned about below `REUSE_WARNING_BELOW` only, as before.)"""
    if ratio is None or batch_size is None or reuse >= ratio / 2:
        return False
    mark = watermark or 1
    return ratio * (batch_size - mark) > ratio * mark + batch_size


def _batch_advice(per_rank: float, ratio: float | None) -> str:
    """The fix for a batch large against the stream, in the run's figures. With a ratio
    R, each sample is drawn about ``R x (1 - batch_size / P)`` times in process (P samples
    per rank): within 10% of R for ``batch_size <= P / 10``, said in words that read right
    for every P (a user read "--batch_size <= 1" as nonsense; under 10 samples per rank
    no batch size comes that near)."""
    tenth = int(per_rank // 10)  # the largest batch size within 10% of R
    if tenth >= 2:
        near = f"within 10% of R for a --batch_size of {tenth} or less"
    elif tenth == 1:
        near = "within 10% of R only for a --batch_size of 1"
    else:
        near = "no --batch_size comes within 10% of R with under 10 samples per rank"
    drawn = (
        f"with a ratio R each sample is drawn about R x (1 - batch_size / {per_rank:.0f}) "
        f"times in process: {near}"
        if ratio is not None
        else "a batch needs that many samples held"
    )
    return (
        f"Lower --batch_size well below the samples each rank receives ({drawn}), or "
        "stream more samples per rank (the study's n_simulations; a buffer holds at "
        "most --buffer_size, so a batch may not exceed it either)"
    )


def _draws_apart(trained: int, got: int, num_processes: int) -> str:
    """The end-of-run line's clause when the samples trained on (`trained`) are not the
    buffers' draws (`got`), in the terms of the run. The batches the trainer drew ahead
    of a stop (the next stop synchronisation's window, `StreamDataset.prefetch`) are
    drawn, not trained on; a checkpoint keeps them (`StreamDataset.save`), so a resume
    trains on them first. Under several ranks, a rank whose data ran out first also
    trains on its last batches again until every rank's has (`StreamDataset.pad`:
    trained on, not drawn). One rank never pads: a one-rank run's only cause is the
    first (a one-rank run SIGTERMed at 8 s once read "29632 drawn" against "29440
    trained on", with the two-rank reasons)."""
    if num_processes <= 1:
        if got > trained:
            return (
                f"; {got} drawn from the buffer: the last {got - trained} were drawn ahead "
                "of the stop and not trained on (a checkpoint written at the stop keeps "
                "them: a resume trains on them first)"
            )
        return f"; {got} drawn from the buffer"  # (not met: one rank never pads)
    return (
        f"; {got} drawn from the buffers: a rank whose data ran out first trains "
        "on its last batches again until every rank's has, and batches drawn ahead "
        "of a stop are not trained on (a checkpoint written at the stop keeps them)"
    )
