"""``greater_is_better=True`` with a loss as `metric_for_best_model` (the default
``eval_loss``, or any name ending in ``loss``, the rule by which HF's Trainer infers the
direction) is almost always a slip: the "best" checkpoint would be the worst one and
early stopping would wait for the loss to grow. It is still allowed (a user's metric may
be a negated loss), with a warning at configuration naming both fields and the fix.
Before, it was accepted silently."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from melissa_trainer import TrainingArguments


def made(tmp_path: Path, **fields: object) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        TrainingArguments(output_dir=str(tmp_path / "out"), report_to="none", **fields)  # type: ignore[arg-type]
    return [str(w.message) for w in seen if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("metric", ["eval_loss", "eval_sim_loss", "eval_Loss"])
def test_a_larger_loss_counted_better_is_warned_naming_the_fields_and_the_fix(
    tmp_path: Path, metric: str
) -> None:
    (said,) = made(tmp_path, metric_for_best_model=metric, greater_is_better=True)
    assert f"metric_for_best_model={metric!r}" in said and "greater_is_better=True" in said
    assert "greater_is_better=False" in said  # the fix


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"greater_is_better": False},
        {"metric_for_best_model": "eval_accuracy", "greater_is_better": True},
        {"metric_for_best_model": "eval_loss_p99", "greater_is_better": False},
    ],
)
def test_a_consistent_direction_is_not_warned(tmp_path: Path, fields: dict[str, object]) -> None:
    assert made(tmp_path, **fields) == []


def test_the_help_of_greater_is_better_says_it(tmp_path: Path) -> None:
    import dataclasses

    (f,) = [f for f in dataclasses.fields(TrainingArguments) if f.name == "greater_is_better"]
    assert "loss" in str(f.metadata.get("help", "")), f.metadata
