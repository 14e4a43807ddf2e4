"""A sampler `prepare`d before it is `plan`ned (a user's script calling the two in that
order; the `Launcher` plans first) draws what the planned order draws, and its state
loads. Before, the "lhs" design prepared at the default block size was kept after
`plan(n)` set another size: the draws took that design's points in blocks of n, and
the state did not load ("exploration state has a malformed design": its points
disagreed with its size). Failed before, for both samplers with an "lhs" design.

The oracle: the same sampler planned first, then prepared, bit for bit."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import BreedSampler
from melissa_trainer.launcher.density import DensitySampler

BOX = {"a": (0.0, 1.0), "b": (-2.0, 2.0)}
MAKERS: dict[str, Callable[[], Any]] = {
    "breed": lambda: BreedSampler(BOX, 3, explorer="lhs"),
    "density": lambda: DensitySampler(BOX, 3),
}


def draws(sampler: Any, n: int) -> np.ndarray:
    return np.array([[p[k] for k in BOX] for p in (sampler.draw() for _ in range(n))])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_prepared_before_planned_draws_and_saves_as_planned_first(kind: str) -> None:
    planned_first, prepared_first = MAKERS[kind](), MAKERS[kind]()
    planned_first.plan(10)
    planned_first.prepare()
    prepared_first.prepare()
    prepared_first.plan(10)
    np.testing.assert_array_equal(draws(prepared_first, 4), draws(planned_first, 4))
    state = json.loads(json.dumps(prepared_first.state_dict()))
    resumed = MAKERS[kind]()
    resumed.plan(10)
    resumed.load_state_dict(state)  # (before: "exploration state has a malformed design")
    np.testing.assert_array_equal(draws(resumed, 8), draws(planned_first, 8))
