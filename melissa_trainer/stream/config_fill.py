"""A `ReceiverConfig`'s fields filled in by those who know them (`StreamSource.fill_in`:
a `Study` gives its launcher's count, its sampler's names and its rendezvous, the
trainer its run id), and the check of a study's parameter order against the config's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["check_order", "filled", "filled_here", "unfilled"]


def filled(config: ReceiverConfig, **values: Any) -> ReceiverConfig:
    """`config` with each field of `values` that is None in it set to its value (a
    value None changes nothing)."""
    for name, value in values.items():
        if getattr(config, name) is None and value is not None:
            config = replace(config, **{name: value})
    return config


def filled_here(before: ReceiverConfig, after: ReceiverConfig) -> dict[str, Any]:
    """The fields None in `before` and set in `after` (by `filled`), with their values."""
    return {
        name: getattr(after, name)
        for name in ("expected_simulations", "rendezvous_dir", "run_id", "parameters")
        if getattr(before, name) is None and getattr(after, name) is not None
    }


def unfilled(
    config: ReceiverConfig, filled_in: dict[str, Any], names: Sequence[str]
) -> ReceiverConfig:
    """`config` with each field of `names` that still holds the value `filled_in` says
    was filled in set back to None (and dropped from `filled_in`); a field given, or
    changed since it was filled in, is kept."""
    for name in names:
        if name in filled_in and getattr(config, name) == filled_in[name]:
            cleared: dict[str, Any] = {name: None}  # (a field of ReceiverConfig's)
            config = replace(config, **cleared)
            del filled_in[name]
    return config


def check_order(given: Sequence[str] | None, names: Sequence[str] | None) -> None:
    """Refuse `given` (``ReceiverConfig.parameters``) when it lists `names` (a study's
    sampler's) in another order, naming both orders and the fix (`StreamSource.fill_in`). Other
    names are not this check's: each HELLO is checked against `given` at admission
    (`schema.StudySchema.admit`), as before."""
    if given is None or names is None or list(given) == list(names):
        return
    if sorted(given) != sorted(names):
        return
    raise ValueError(
        f"ReceiverConfig(parameters={list(given)}) lists the study's parameters in another "
        f"order than its sampler's names {list(names)}: each sample's parameters vector "
        f"would be in the first order, and a held-out sample built from sampler.draw() in "
        f"the second, so that the model reads one parameter as another. Give "
        f"ReceiverConfig(parameters={list(names)}), the sampler's order, or leave "
        f"parameters out: a Study gives its sampler's names"
    )
