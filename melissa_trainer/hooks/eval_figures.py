"""A hook's own validation metrics (`Hook.eval_figures`, `Hook.eval_keys`) added to a
validation's metrics, and the warning for a key a hook adds to `logs` or `metrics`
itself, which nothing reads: the console, TensorBoard and ``state.log_history`` have
taken them before the user's hooks run (`HookList.fire`).

`add_eval_figures` runs in `OnlineTrainer.evaluate` after the trainer's own metrics are
reduced over ranks and before anything reads them (`metric_for_best_model`,
``log_history``, VALIDATION_END), so a hook's metric goes wherever ``eval_loss`` goes.

A hook's values are not reduced (a mean would hide a metric computed on one rank's
share only, a sum would double one computed on the whole set): they must be the same
on every rank. Under several ranks they are gathered (one `all_gather_object` per
validation, a few floats) and compared (`disagreement`): values that differ beyond
rounding are a ValueError on every rank, naming the hook, the key and each rank's
value; values equal up to rounding (`REL_TOL`: a metric computed on each rank with
nondeterministic kernels) are replaced by rank 0's on every rank, so that every rank
logs and decides (`metric_for_best_model`, early stopping) on the same number. A rank
whose hook raises still joins that gather, so that every rank fails together, the others
naming it, rather than waiting for it in the collective. That gather is watched (the
trainer's `StopSync.watch`): a rank held there by a stopped or hung one warns.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from melissa_trainer.core.wait_words import EVAL_USUAL
from melissa_trainer.hooks.events import Event

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["AddedKeys", "add_eval_figures", "disagreement", "eval_key"]

logger = logging.getLogger("melissa_trainer")

#: a validation metric's prefix (``eval_loss``), added to a hook's keys without it
PREFIX = "eval_"


def eval_key(key: str) -> str:
    """`key` as a validation metric: with the ``eval_`` prefix (as HF's Trainer adds it
    to what ``compute_metrics`` returns)."""
    return key if key.startswith(PREFIX) else PREFIX + key


def add_eval_figures(hooks: Sequence[Any], trainer: TrainerView, metrics: dict[str, float]) -> None:
    """Add each of `hooks`' `eval_figures(trainer)` to `metrics`, its keys prefixed
    (`eval_key`) and its values as floats.

    Raises ValueError, naming the hook and the key, for a key that `metrics` has already
    (the trainer's own, or another hook's: a metric is never overwritten), a value that
    is not a number, and a key of the hook's `eval_keys` that it did not return (the
    one `metric_for_best_model` may name); and, under several ranks, a value that is
    not the same on every rank (`disagreement`). Raises TypeError, naming the hook and
    what it returned, for an `eval_figures` that returns no mapping (None: a method
    that forgot its ``return``).

    Under several ranks this is a collective, called on every rank, and it fails on
    every rank together: a rank whose hooks raised (any exception, the hook's own or
    one of the above) still joins the gather, with its error in words, and raises its
    error as it is; every other rank raises a RuntimeError naming that rank and its
    error. (Before, the failing rank left and the others waited in the gather.)"""
    owners: dict[str, str] = {}  # each key added, and the hook that gives it
    failure: Exception | None = None
    try:
        _collect(hooks, trainer, metrics, owners)
    except Exception as exc:  # told to every rank below, then raised here
        failure = exc
    if not (hooks and trainer.num_processes > 1 and torch.distributed.is_initialized()):
        if failure is not None:
            raise failure
        return
    said = None if failure is None else f"{type(failure).__name__}: {failure}"
    mine = ({k: metrics[k] for k in owners}, owners, said)
    gathered: list[Any] = [None] * trainer.num_processes
    what = "the other ranks at a validation's gather of the hooks' eval_figures"
    with trainer.stop_sync.watch.waiting(what, EVAL_USUAL):  # (every rank: a collective)
        torch.distributed.all_gather_object(gathered, mine)
    if failure is not None:
        raise failure
    failed = [(rank, words) for rank, (_, _, words) in enumerate(gathered) if words]
    if failed:
        rank, words = failed[0]
        raise RuntimeError(
            f"a hook's eval_figures failed on rank {rank} ({words}): every rank stops "
            "with it (a validation's metrics must be the same on every rank); see that "
            "rank's traceback"
        )
    every: dict[str, str] = {}  # every rank's keys, rank 0's first: the same on all
    for _, theirs, _ in gathered:
        every.update({k: v for k, v in theirs.items() if k not in every})
    problem = disagreement([figures for figures, _, _ in gathered], every)
    if problem is not None:
        raise ValueError(problem)
    metrics.update(gathered[0][0])  # (equal up to rounding: rank 0's on every rank)


def _collect(
    hooks: Sequence[Any], trainer: TrainerView, metrics: dict[str, float], owners: dict[str, str]
) -> None:
    """This rank's part of `add_eval_figures`: each hook's figures checked and added to
    `metrics`, and to `owners` the hook's name for each key; raises its ValueErrors."""
    for hook in hooks:
        theirs = hook.eval_figures(trainer)
        named = type(hook).__name__
        if not isinstance(theirs, Mapping):  # (None: a method that forgot its return)
            raise TypeError(
                f"hook {named}'s eval_figures returned {_shown(theirs)}, not a dict: return "
                "a dict of metric name -> number, {} for none"
            )
        mine: dict[str, float] = {}
        for key, value in theirs.items():
            full = eval_key(str(key))
            if full in metrics or full in mine:
                raise ValueError(
                    f"hook {named}'s eval_figures gives {key!r}, but the validation has "
                    f"{full!r} already (the trainer's own, or another hook's: "
                    f"{', '.join(sorted(metrics))}): give it another name"
                )
            try:
                mine[full] = float(value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"hook {named}'s eval_figures gives {key!r} = {value!r}, which is not "
                    "a number: return a float (a tensor's .item())"
                ) from None
        missing = sorted({eval_key(k) for k in hook.eval_keys} - set(mine))
        if missing:
            raise ValueError(
                f"hook {named} declares {missing} in its eval_keys but its eval_figures "
                f"returned {sorted(mine)}: return every key it declares"
            )
        metrics.update(mine)
        owners.update(dict.fromkeys(mine, named))


def _shown(value: Any) -> str:
    """`value` for an error: None as itself, anything else its type and a short repr."""
    if value is None:
        return "None"
    return f"a {type(value).__name__} ({repr(value)[:80]})"


#: the relative difference of a hook's value between ranks taken for rounding: float32
#: sums in another order differ by a few of its 1.2e-7 steps per thousand terms; a
#: figure of one rank's share, not reduced, differs by far more
REL_TOL = 1e-5


def disagreement(ranks: Sequence[Mapping[str, float]], owners: Mapping[str, str]) -> str | None:
    """The error for the first key of `owners` (a metric, the name of the hook that
    gives it) whose value is not the same in every rank's entry of `ranks` (missing on
    a rank, or beyond `REL_TOL` of rank 0's; NaN equals NaN), naming each rank's value;
    None when every key agrees."""
    for key, named in owners.items():
        values = [figures.get(key) for figures in ranks]
        first = values[0]
        same = first is not None and all(
            v is not None
            and (math.isclose(first, v, rel_tol=REL_TOL) or (math.isnan(first) and math.isnan(v)))
            for v in values
        )
        if not same:
            each = ", ".join(
                f"{'missing' if v is None else repr(v)} on rank {i}" for i, v in enumerate(values)
            )
            return _differ(key, named, each)
    return None


def _differ(key: str, named: str, each: str) -> str:
    return (
        f"hook {named}'s eval_figures gives {key!r} different values on the ranks ({each}): "
        "a hook's values are not reduced over ranks, so the logs would show rank 0's "
        "alone and metric_for_best_model could decide otherwise on each rank. Return the "
        "same value on every rank: compute it over the whole trainer.eval_dataset, or "
        "reduce your rank's share, e.g. trainer.accelerator.reduce(torch.tensor([total, "
        "count]), 'sum') (a collective, which every rank calls there)"
    )


class AddedKeys:
    """Warns, once per hook method and key, about a key added to LOG's `logs` or
    VALIDATION_END's `metrics` by a hook: the console, TensorBoard and
    ``state.log_history`` have taken them before (the built-in hooks come first), so
    the key reaches nothing but the hooks after it. The warning names the way that does
    reach them (`log_figures`, `eval_figures`)."""

    def __init__(self) -> None:
        self._said: set[tuple[str, str]] = set()

    def warn(self, method: Any, event: Event, added: Iterable[str]) -> None:
        who = getattr(method, "__qualname__", repr(method))
        new = sorted(k for k in added if (who, k) not in self._said)
        if not new:
            return
        self._said.update((who, k) for k in new)
        payload, way = (
            ("logs", "return it from the hook's log_figures")
            if event is Event.LOG
            else ("metrics", "return it from the hook's eval_figures")
        )
        logger.warning(
            "%s added %s to %s: the console, TensorBoard and state.log_history took them "
            "before it ran, so it reaches only the hooks after it; %s instead",
            who,
            ", ".join(map(repr, new)),
            payload,
            way,
        )
