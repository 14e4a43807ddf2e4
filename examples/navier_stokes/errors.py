"""The Navier–Stokes example's errors on its held-out simulations beside the MSE: the
relative L2 error neural-operator papers report, pooled and by lead time, for the model
and for the two baselines alike.

The relative L2 error of one sample is ``||prediction - truth||_2 / ||truth||_2`` over
its grid (one field at one time); the figure reported is its mean over the samples, as
the FNO literature averages it. The baselines are those of `train.baselines`, as
predictions: the mean field (each grid point's average over every validation field,
the same field for every sample) and persistence (omega(0), the field the model is
given). "By lead time": the same errors over the samples of one time step, t =
(time step + 1) x interval, since a single figure over all times hides a model whose
late-time predictions are much smoother than the truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["field_errors", "lead_time_table", "mse_tails", "relative_l2", "shown_lead_times"]


def relative_l2(prediction: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per sample ``||prediction - truth||_2 / ||truth||_2`` over every axis but the
    first, in float64: shape (N,). `prediction` broadcasts against `truth` (N, n, n)
    (the mean field is one (n, n) field). A zero truth gives inf (or nan for an exact
    zero prediction), not an error: the caller's fields are never zero."""
    truth = np.asarray(truth, np.float64)
    diff = np.broadcast_to(np.asarray(prediction, np.float64), truth.shape) - truth
    axes = tuple(range(1, truth.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((diff**2).sum(axis=axes)) / np.sqrt((truth**2).sum(axis=axes))


def field_errors(
    samples: Sequence[Mapping[str, Any]], predictions: np.ndarray, interval: float
) -> dict[str, Any]:
    """The model's and the baselines' errors on `samples` (the validation set: fields
    ``vorticity``, ``initial``, ``time_step``), the model's fields being `predictions`
    (len(samples), n, n), in the samples' order.

    Returns ``val_rel_l2``, ``mean_field_rel_l2``, ``persistence_rel_l2`` (means over
    every sample of the per-sample relative L2 error), ``val_mse_of_predictions`` (the
    model's MSE over every grid point of every sample: the trainer's validation MSE of
    the same model, up to rounding, when it trains on the default loss), and
    ``by_lead_time``: one row per time step present, in order, each with ``time_step``,
    ``t``, ``samples`` and the model's and both baselines' ``*_mse`` and ``*_rel_l2``
    over that time step's samples.

    Raises ValueError when `predictions` do not hold one field per sample."""
    truth = np.stack([s["vorticity"] for s in samples]).astype(np.float64)
    if np.shape(predictions) != truth.shape:
        raise ValueError(
            f"predictions of shape {np.shape(predictions)} for {len(samples)} validation "
            f"fields of shape {truth.shape[1:]}: one field per sample, in order"
        )
    initial = np.stack([s["initial"] for s in samples]).astype(np.float64)
    steps = np.array([int(s["time_step"]) for s in samples])
    guesses = {
        "val": np.asarray(predictions, np.float64),
        "mean_field": truth.mean(axis=0),
        "persistence": initial,
    }
    relative = {name: relative_l2(guess, truth) for name, guess in guesses.items()}
    squared = {
        name: ((np.broadcast_to(guess, truth.shape) - truth) ** 2).mean(axis=(1, 2))
        for name, guess in guesses.items()
    }  # each sample's MSE: every sample has n^2 points, so their mean is the pooled MSE
    rows = []
    for step in sorted(set(steps.tolist())):
        at = steps == step
        row: dict[str, Any] = {
            "time_step": step,
            "t": (step + 1) * interval,
            "samples": int(at.sum()),
        }
        for name in guesses:
            row[f"{name}_mse"] = float(squared[name][at].mean())
            row[f"{name}_rel_l2"] = float(relative[name][at].mean())
        rows.append(row)
    return {
        "val_rel_l2": float(relative["val"].mean()),
        "mean_field_rel_l2": float(relative["mean_field"].mean()),
        "persistence_rel_l2": float(relative["persistence"].mean()),
        "val_mse_of_predictions": float(squared["val"].mean()),
        "by_lead_time": rows,
    }


def shown_lead_times(time_steps: int) -> list[int]:
    """The time steps the printed table (and the PNG) show: the first, the last and two
    between, at most four."""
    return sorted({0, time_steps // 3, 2 * time_steps // 3, time_steps - 1})


def lead_time_table(errors: Mapping[str, Any], model_name: str, time_steps: int) -> list[str]:
    """The printed lines: the pooled relative L2 errors, then the errors by lead time at
    `shown_lead_times` (the JSON summary has every time step; the header says how many
    are shown when not all are)."""
    ours = errors["val_rel_l2"]
    shown = set(shown_lead_times(time_steps))
    present = [row["time_step"] for row in errors["by_lead_time"]]
    some = sum(step in shown for step in present)
    # (the table would otherwise read as every lead time: --json prints them all)
    note = (
        f"   ({some} of {len(present)} lead times; --json has all)" if some < len(present) else ""
    )
    lines = [
        f"relative L2 error (mean over held-out fields of ||pred - true|| / ||true||): "
        f"{ours:.3g} vs mean field {errors['mean_field_rel_l2']:.3g} and persistence "
        f"{errors['persistence_rel_l2']:.3g}",
        f"by lead time     t   {'rel. L2 ' + model_name:>16}   mean field   persistence"
        f"   MSE {model_name}{note}",
    ]
    for row in errors["by_lead_time"]:
        if row["time_step"] in shown:
            lines.append(
                f"{'':12}{row['t']:6.3g}   {row['val_rel_l2']:16.3g}   "
                f"{row['mean_field_rel_l2']:10.3g}   {row['persistence_rel_l2']:11.3g}   "
                f"{row['val_mse']:.3g}"
            )
    return lines


def mse_tails(
    samples: Sequence[Mapping[str, np.ndarray]], predictions: np.ndarray
) -> dict[str, float]:
    """``p99`` and ``max`` of the held-out simulations' MSEs of `predictions` (one field
    per sample), as the trainer's validation tails are of its loss (numpy's linear
    percentile, as there)."""
    ids = np.array([int(s["simulation_id"]) for s in samples])
    squared = np.stack(
        [
            (np.asarray(p, np.float64) - s["vorticity"]) ** 2
            for p, s in zip(predictions, samples, strict=True)
        ]
    ).mean(axis=(1, 2))
    per_simulation = [float(squared[ids == i].mean()) for i in sorted(set(ids.tolist()))]
    return {"p99": float(np.percentile(per_simulation, 99)), "max": max(per_simulation)}
