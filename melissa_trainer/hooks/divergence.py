"""The end-of-run divergence warning (`diverged`, the first branch of
`hooks.reuse.data_limited`): a loss that grew by an order of magnitude above its best
is an optimisation diverging, and the advice is the learning rate.

It must not cry wolf. A user's run (a StepLR scheduler down to ~4e-11, validation every
5 steps, batch 8, a log every 5 steps) ended told "the training loss grew from 0.0003177
(step 65) to 0.003229 (step 264) ... Lower the learning rate" with its ``eval_loss`` at
its best and its learning rate at ~0: the rule compared the last training-loss window
(the mean of 40 samples) with the lowest of 53 such windows, and the lowest of many
noisy windows is an outlier. The training-loss rule now compares smoothed levels, and
is silenced by what the history says against it (`diverged`). Levels miss a divergence
that shows in the last log or two only (the loss a hundred times higher at once, the
median of the last 5 logs still low), so a sharp jump of those logs, beyond any rise
the history showed before, is a growth too.
"""

from __future__ import annotations

import math
from statistics import median

__all__ = ["DIVERGED_GROWTH", "JUMP_BEYOND", "JUMP_LOGS", "LR_AT_REST", "SMOOTHED_LOGS", "diverged"]

#: a last ``eval_loss`` this many times the best, or a training-loss level this many
#: times its lowest, is divergence, not fitting: a model fitting its samples loses
#: validation slowly (1.04 -> 1.46 in tests/hooks/test_data_limited.py), a diverging one
#: by orders (0.60 -> 13.7, htrial16; 0.55 -> 16.5, htrial17)
DIVERGED_GROWTH = 10.0
#: the training loss's level is the median of this many consecutive logs, or of half
#: the logs in a shorter history (one log each under 4 logs, as short runs always
#: were): one window, the mean of a few batches, is noisy, and the lowest of many is an
#: outlier (the figures: docs/concepts/buffers.md, "The divergence warning")
SMOOTHED_LOGS = 5
#: a learning rate at most this share of the run's highest logged one is at rest: the
#: weights barely move, so a loss that grew meanwhile did not grow by the optimisation
LR_AT_REST = 1e-3
#: a jump is in at most this many last logs: a divergence that shows in more of them
#: raises the level (the median of the last `SMOOTHED_LOGS`)
JUMP_LOGS = 2
#: a jump of the last logs is beyond the history's own spread when it is at least this
#: many times the largest rise of any earlier log over the median of the logs before it
#: (3: no false alarm added on 1000 tuning series of five noise families, seeds 0-199
#: of benchmarks/divergence_alarms.py; 2 added one, 1 added eight)
JUMP_BEYOND = 3.0

_ADVICE = (
    ": this looks like a diverging optimisation, not a study short of data. Lower "
    "the learning rate (the optimizer's lr given to OnlineTrainer; or warm it up "
    "with a scheduler), or clip the gradients (--max_grad_norm), then judge the data"
)


def diverged(history: list[dict[str, float]]) -> str | None:
    """The divergence warning for a log history, else None. Either of two growths
    suffices, whatever the other does:

    - validation: the last ``eval_loss`` is at least `DIVERGED_GROWTH` times the best
      positive one (a fixed validation set: one validation is not noisy the way a
      training window is, and an early stop with patience 1 has one after its best);
    - the training ``loss`` (each log the mean over its window): its level now, the
      median of its last k logs, is at least `DIVERGED_GROWTH` times its lowest level
      before them, the lowest median of k consecutive logs, k = `SMOOTHED_LOGS` or half
      the logs if fewer (a history of 2 or 3 logs: the last log against the lowest one
      before it). A growth is then seen once it holds over most of the last k logs.
      Not when a validation at or after the first of those last logs is the best
      (ties: the latest): the model on held-out data was at its best while the
      training loss was high, so the optimisation did not diverge (a stream brings new
      samples, harder ones too);
    - a sharp jump of the training loss in its last j logs (j = 1 or 2, up to
      `JUMP_LOGS`), which the level misses: the least of them is at least
      `DIVERGED_GROWTH` times the median of the k logs before them, and at least
      `JUMP_BEYOND` times the largest rise any earlier log had over the median of the
      k logs before it (the history's own spread: a noisy loss rises often, a
      diverging one beyond that). Only with at least 2k logs before them, all
      positive; not when a validation at or after the first of them is the best.

    Neither growth is divergence when the learning rate logged from the best (the best
    validation's step; the first log of the lowest training level, its latest if tied)
    through the end stayed at most `LR_AT_REST` times the highest logged in the run:
    the weights barely moved, so the optimisation cannot have grown the loss. Logs
    whose loss is NaN (a window without a step) are skipped. The warning names what
    grew, and says so when the training loss fell meanwhile (a model fitting its
    samples loses validation slowly, not by an order of magnitude)."""
    evals = [(e["step"], e["eval_loss"]) for e in history if "eval_loss" in e]
    losses = [
        (e["step"], e["loss"])
        for e in history
        if "loss" in e and "eval_loss" not in e and not math.isnan(e["loss"])
    ]
    rates = [(e["step"], e["learning_rate"]) for e in history if "learning_rate" in e]
    seen: list[str] = []
    if evals:
        best_step, best_eval = min(evals, key=lambda e: e[1])
        last_step, last_eval = evals[-1]
        if (
            best_eval > 0
            and last_eval >= DIVERGED_GROWTH * best_eval
            and not _at_rest(rates, best_step)
        ):
            seen.append(
                f"validation stopped improving at step {best_step:.0f} (eval_loss "
                f"{best_eval:.4g}) and grew to {last_eval:.4g} by step {last_step:.0f}, "
                f"{last_eval / best_eval:.0f} times its best"
            )
            then = [loss for step, loss in losses if step <= best_step]
            if then and losses and losses[-1][1] < then[-1]:
                seen[-1] += (
                    f", while the training loss fell ({then[-1]:.4g} -> {losses[-1][1]:.4g}): "
                    "a model fitting the samples it has loses validation slowly, not by an "
                    "order of magnitude"
                )
    grew = _training_loss_grew(losses, evals, rates) or _training_loss_jumped(losses, evals, rates)
    if grew is not None:
        seen.append(grew)
    if not seen:
        return None
    return "; ".join(seen) + _ADVICE


def _training_loss_grew(
    losses: list[tuple[float, float]],
    evals: list[tuple[float, float]],
    rates: list[tuple[float, float]],
) -> str | None:
    """`diverged`'s training-loss clause (its rule), else None; `losses`, `evals` and
    `rates`: (step, value) in log order."""
    if len(losses) < 2:
        return None
    k = min(SMOOTHED_LOGS, len(losses) // 2)
    values = [loss for _, loss in losses]
    now = median(values[-k:])
    # the lowest level before the last k logs, of windows of k consecutive logs (ties:
    # the latest, the last time the loss was that low: the rise came after it)
    low_at = min(reversed(range(len(values) - 2 * k + 1)), key=lambda i: median(values[i : i + k]))
    low = median(values[low_at : low_at + k])
    if not (low > 0 and now >= DIVERGED_GROWTH * low):
        return None
    rose_at = losses[-k][0]
    if evals:
        best_step = min(reversed(evals), key=lambda e: e[1])[0]  # (ties: the latest)
        if best_step >= rose_at:
            return None
    if _at_rest(rates, losses[low_at][0]):
        return None
    if k == 1:
        return (
            f"the training loss grew from {low:.4g} (step {losses[low_at][0]:.0f}) to "
            f"{now:.4g} (step {losses[-1][0]:.0f}), {now / low:.0f} times its lowest"
        )
    return (
        f"the training loss grew from {low:.4g} (the median of its logs at steps "
        f"{losses[low_at][0]:.0f}-{losses[low_at + k - 1][0]:.0f}) to {now:.4g} (its "
        f"last {k}, steps {rose_at:.0f}-{losses[-1][0]:.0f}), {now / low:.0f} times its "
        "lowest"
    )


def _training_loss_jumped(
    losses: list[tuple[float, float]],
    evals: list[tuple[float, float]],
    rates: list[tuple[float, float]],
) -> str | None:
    """`diverged`'s sharp-jump clause (its rule), else None; arguments as
    `_training_loss_grew`'s."""
    k = SMOOTHED_LOGS
    values = [loss for _, loss in losses]
    # (the most logs first: a jump of the last 2 is named as such, not as its last log's)
    for j in range(JUMP_LOGS, 0, -1):
        before = values[:-j]
        # (a loss at or below 0, a custom one, has no ratios to compare)
        if len(before) < 2 * k or min(before) <= 0:
            continue
        base = median(before[-k:])
        top = min(values[-j:])
        if top < DIVERGED_GROWTH * base:
            continue
        spread = max(before[i] / median(before[i - k : i]) for i in range(k, len(before)))
        if top < JUMP_BEYOND * spread * base:
            continue
        rose_at = losses[-j][0]
        if evals and min(reversed(evals), key=lambda e: e[1])[0] >= rose_at:
            return None
        if _at_rest(rates, losses[-j - k][0]):
            return None
        logs = f"step {rose_at:.0f}" if j == 1 else f"steps {rose_at:.0f}-{losses[-1][0]:.0f}"
        last = "its last log" if j == 1 else f"its last {j} logs"
        return (
            f"the training loss jumped to {top:.4g} ({last}, {logs}) from {base:.4g} (the "
            f"median of the {k} logs before), {top / base:.0f} times, where no earlier log "
            f"rose over {spread:.1f} times"
        )
    return None


def _at_rest(rates: list[tuple[float, float]], since: float) -> bool:
    """Whether every learning rate logged from step `since` on is at most `LR_AT_REST`
    times the highest logged (False without a positive one logged since)."""
    later = [lr for step, lr in rates if step >= since]
    peak = max((lr for _, lr in rates), default=0.0)
    return bool(later) and peak > 0 and max(later) <= LR_AT_REST * peak
