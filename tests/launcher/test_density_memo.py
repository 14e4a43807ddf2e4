"""`DensitySampler.warp` computes again only when the observations or the options
changed (issue 46, tenth round): its draws, warps and state equal, bit for bit, those of
a sampler that computes every warp (`_computed_warp`, the plain path), over studies that
draw with and without observations in between, re-observe with the same and with new
losses, overflow the window, change an option and resume from a saved state."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import DensitySampler

SPACE = {**{f"p{i}": (0.0, 10.0) for i in range(7)}, "fixed": (3.0, 3.0)}
DRAWS = 40
CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "tilt": {"tilt": 2.0, "evidence": 0.0},
    "candidates": {"candidates": 4, "evidence": 0.0},
    "window": {"window": 9, "min_observations": 8, "contrast": 0.5, "evidence": 2.5},
}


class Plain(DensitySampler):
    """The oracle: every `warp` computed from the observations, no memo."""

    def warp(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        return self._computed_warp()


class Counting(DensitySampler):
    """The sampler under test, counting the warps it computes."""

    computed = 0

    def _computed_warp(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        self.computed += 1
        return super()._computed_warp()


def loss_of(parameters: dict[str, float], age: int) -> float:
    p = parameters
    return math.exp(0.4 * p["p0"]) * (1.0 + 0.1 * p["p1"]) * (1.0 + 0.01 * age)


def hexed(value: Any) -> Any:
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, np.ndarray):
        return value.tobytes().hex()
    if isinstance(value, dict):
        return {k: hexed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [hexed(v) for v in value]
    return value


def study(cls: type[DensitySampler], options: dict[str, Any], seed: int) -> dict[str, Any]:
    """A study on one random schedule (`seed`): between two draws, nothing, some
    simulations observed, the same loss reported again, or an option changed; a
    save and a resume into a new sampler half-way."""
    schedule = random.Random(seed)
    sampler = cls(SPACE, seed=seed, **options)
    sampler.plan(DRAWS)
    draws: list[dict[str, float]] = []
    warps: list[Any] = []
    moves: set[str] = set()  # the kinds of move the schedule made
    for i in range(DRAWS):
        move = schedule.random()
        if move < 0.4 and draws:  # some of the simulations report
            for sid in schedule.sample(range(len(draws)), k=schedule.randint(1, len(draws))):
                sampler.observe(sid, draws[sid], loss_of(draws[sid], i))
            moves.add("observed")
        elif move < 0.5 and sampler.observations:  # the same loss again: the newest
            old = sampler.observations[0]
            sampler.observe(old.simulation_id, old.parameters, old.loss)
            moves.add("again")
        elif move < 0.55:  # an option changed between draws
            sampler.share = schedule.choice((0.3, 0.5, 0.7))
            moves.add("option")
        if i == DRAWS // 2:
            state = sampler.state_dict()
            resumed = cls(SPACE, seed=seed, **options)
            resumed.share = sampler.share
            resumed.load_state_dict(state)
            if isinstance(sampler, Counting):
                assert isinstance(resumed, Counting)
                resumed.computed = sampler.computed
            sampler = resumed
        draws.append(sampler.draw())
        warps.append(hexed(sampler.warp()))
        warps.append(hexed(sampler._hard))
    return {"draws": hexed(draws), "warps": warps, "state": hexed(sampler.state_dict()),
            "sampler": sampler, "moves": moves}  # fmt: skip


#: the schedules' seeds (each makes every kind of move: the test checks it)
SEEDS = (0, 1, 2)


def grid() -> list[Any]:
    """Every option set with every schedule. The inner tier runs them on the diagonal:
    each option set once, each schedule at least once (4 of 12; every schedule makes
    every kind of move, so the others repeat a path with other values); the others
    carry the ``e2e`` marker: the full suite runs all 12."""
    return [
        pytest.param(name, seed, marks=() if seed == SEEDS[i % len(SEEDS)] else pytest.mark.e2e)
        for i, name in enumerate(CASES)
        for seed in SEEDS
    ]


@pytest.mark.parametrize(("name", "seed"), grid())
def test_the_memo_draws_as_the_plain_path_bit_for_bit(name: str, seed: int) -> None:
    ours, plain = study(Counting, CASES[name], seed), study(Plain, CASES[name], seed)
    assert ours["draws"] == plain["draws"]
    assert ours["warps"] == plain["warps"]
    assert ours["state"] == plain["state"]
    assert ours["moves"] == {"observed", "again", "option"}  # (see `grid`)
    # the memo was used (else this test would compare the plain path with itself):
    # fewer warps computed than asked for (two a draw: `draw`'s and the test's)
    assert 0 < ours["sampler"].computed < DRAWS


def test_the_memo_changes_with_every_kind_of_change() -> None:
    sampler = Counting(SPACE, seed=3, evidence=0.0)
    sampler.plan(20)
    draws = [sampler.draw() for _ in range(10)]
    for sid, parameters in enumerate(draws):
        sampler.observe(sid, parameters, loss_of(parameters, 0))
    before = sampler.computed  # (the draws' warps, without observations: computed once)
    assert before == 1
    first = sampler.warp()
    assert first is not None and sampler.computed == before + 1
    assert sampler.warp() is not first and hexed(sampler.warp()) == hexed(first)
    assert sampler.computed == before + 1  # nothing changed: no new computation
    sampler.observe(0, draws[0], loss_of(draws[0], 0))  # the same loss, now the newest
    sampler.warp()
    assert sampler.computed == before + 2
    sampler.bandwidth = 0.2
    changed = sampler.warp()
    assert sampler.computed == before + 3 and hexed(changed) != hexed(first)
    sampler.load_state_dict(sampler.state_dict())
    sampler.warp()
    assert sampler.computed == before + 4


def test_the_warp_arrays_handed_out_are_read_only() -> None:
    sampler = DensitySampler(SPACE, seed=4, evidence=0.0)
    sampler.plan(20)
    draws = [sampler.draw() for _ in range(10)]
    for sid, parameters in enumerate(draws):
        sampler.observe(sid, parameters, loss_of(parameters, 0))
    warps = sampler.warp()
    assert warps is not None
    cdf, grid = warps[0]
    with pytest.raises(ValueError, match="read-only"):
        cdf[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        grid[0] = 1.0
    hard = sampler._hard[0]
    assert hard is not None
    with pytest.raises(ValueError, match="read-only"):
        hard[0] = 1.0
    warps.clear()  # the list is the caller's: the next warp is whole
    assert len(sampler.warp() or []) == 7
