"""The end-of-run divergence warning (`diverged`, the first branch of
`hooks.reuse.data_limited`): a loss that grew by an order of magnitude above its best
is an optimisation diverging, and the advice is the learning rate.

It must not cry wolf. A user's run (a StepLR scheduler down to ~4e-11, validation every
5 steps, batch 8, a log every 5 steps) ended told "the training loss grew from 0.0003177
(step 65) to 0.003229 (step 264) ... Lower the learning rate" with its ``eval_loss`` at
its best and its learning rate at ~0: the rule compared the last training-loss window
(the mean of 40 samples) with the lowest of 53 such windows, and the lowest of many
noisy windows is an outlier. The training-loss rule now compares smoothed levels, and
is silenced by what the history says against it (`diverged`).
"""

from __future__ import annotations

import math
from statistics import median

__all__ = ["DIVERGED_GROWTH", "LR_AT_REST", "SMOOTHED_LOGS", "diverged"]

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
      samples, harder ones too).

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
    grew = _training_loss_grew(losses, evals, rates)
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


def _at_rest(rates: list[tuple[float, float]], since: float) -> bool:
    """Whether every learning rate logged from step `since` on is at most `LR_AT_REST`
    times the highest logged (False without a positive one logged since)."""
    later = [lr for step, lr in rates if step >= since]
    peak = max((lr for _, lr in rates), default=0.0)
    return bool(later) and peak > 0 and max(later) <= LR_AT_REST * peak
