"""The "lhs" exploration's optimised designs are memoised per process: a sampler built
again with the same seed takes the design without re-running scipy's optimisation,
bit for bit the same, and no sampler can alter another's copy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import exploration
from melissa_trainer.launcher.exploration import Exploration


def _clear_memo() -> None:
    # getattr: before the memo, no such function (each sampler optimised its own design)
    memo = getattr(exploration, "_lhs_design", None)
    if memo is not None:
        memo.cache_clear()


def _draws(seed: int, n: int = 12) -> np.ndarray:
    design = Exploration("lhs", 3, seed, np.ones(3, bool))
    design.plan(n)
    return np.array([design.draw() for _ in range(n)])


@pytest.mark.timeout(60)
def test_a_second_sampler_with_the_seed_reuses_the_design_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clear_memo()
    built: list[Any] = []
    real = exploration.qmc_engine

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(exploration, "qmc_engine", counting)
    first = _draws(seed=5)
    second = _draws(seed=5)
    assert len(built) == 1  # the optimisation ran once
    assert first.tobytes() == second.tobytes()
    # the memo is the computation: a fresh one (memo emptied) draws the same bits
    _clear_memo()
    assert _draws(seed=5).tobytes() == first.tobytes()
    assert len(built) == 2
    assert _draws(seed=6).tobytes() != first.tobytes()  # the seed is in the key


@pytest.mark.timeout(60)
def test_a_sampler_writing_its_design_leaves_the_memo_alone() -> None:
    _clear_memo()
    one = Exploration("lhs", 2, 9, np.ones(2, bool))
    one.plan(8)
    one.prepare()
    assert one._design is not None
    kept = one._design.copy()
    one._design[:] = -1.0  # a sampler's own copy is writable and private
    other = Exploration("lhs", 2, 9, np.ones(2, bool))
    other.plan(8)
    other.prepare()
    assert other._design is not None
    assert other._design.tobytes() == kept.tobytes()
