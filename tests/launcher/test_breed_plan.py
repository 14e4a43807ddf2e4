"""`BreedSampler.prepare` computes its "lhs" design ahead of the first draw, as
`DensitySampler.prepare` does, and `plan` computes nothing: the design's optimisation
(seconds for a few hundred points) is paid when the `Launcher` starts (after a resumed
state is loaded: `test_sampler_resume` holds that a resume computes none), not by the
first draw on the launcher's thread under its lock while the trainer trains; the draws
are the same as when the first draw computed it.

Which call computes a design is counted on `Exploration._block` (each design is
computed by it, once per block); the draws are compared with those of the same sampler
not prepared (the first draw computes the design: what it did before `plan` computed
it), bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import BreedSampler, Launcher
from melissa_trainer.launcher.exploration import Exploration

#: 6 varying parameters: the explorer "auto" is "lhs" (`AUTO_SEQUENCE_DIMS` is 3)
BOX = {f"p{i}": (0.0, 10.0) for i in range(6)}


def count_designs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The blocks whose design is computed from now on, in order."""
    computed: list[int] = []
    block = Exploration._block

    def counted(self: Exploration, number: int) -> np.ndarray:
        computed.append(number)
        return block(self, number)

    monkeypatch.setattr(Exploration, "_block", counted)
    return computed


def run(sampler: BreedSampler, n: int, start: int = 0) -> list[dict[str, float]]:
    """Draws `start` to `start + n`, each observed at once (id: its number; loss: its
    first parameter)."""
    draws = []
    for i in range(start, start + n):
        drawn = sampler.draw()
        sampler.observe(i, drawn, drawn["p0"])
        draws.append(drawn)
    return draws


@pytest.mark.timeout(60)
def test_prepare_computes_the_design_and_the_first_draw_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sampler = BreedSampler(BOX, seed=5)
    assert sampler.engine == "lhs"
    computed = count_designs(monkeypatch)
    sampler.plan(24)
    assert computed == []  # `plan` sizes it: a resume would replace what it computed
    sampler.prepare()
    sampler.prepare()
    assert computed == [0]  # the planned design, by `prepare`, once
    run(sampler, 24)
    assert computed == [0]  # not again: the 24 draws are its points
    sampler.prepare()
    assert computed == [0]  # the budget drawn: the next draws are replacements or none


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_launcher_computes_the_design_when_started_not_when_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sampler = BreedSampler(BOX, seed=5)
    computed = count_designs(monkeypatch)
    launcher = Launcher(["true"], sampler, 12, job_limit=1)
    assert computed == [] and sampler.design_size == 12
    try:
        launcher.start(tmp_path / "rendezvous")  # (prepares before its thread draws)
        assert computed[:1] == [0]
    finally:
        launcher.stop()
    assert computed == [0]


@pytest.mark.timeout(60)
def test_a_sequence_explorer_computes_no_design(monkeypatch: pytest.MonkeyPatch) -> None:
    sampler = BreedSampler(BOX, seed=5, explorer="sobol")
    computed = count_designs(monkeypatch)
    sampler.plan(24)
    run(sampler, 24)
    assert computed == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "options",
    [
        {},  # explores alone, the design in its order
        {"exploration": 0.5, "min_observations": 4, "candidates": 8},  # breeds, gap-fills
    ],
)
def test_the_draws_are_those_of_a_design_computed_by_the_first_draw(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    """30 draws of a budget of 24: the planned design, then the next block's."""
    planned = BreedSampler(BOX, seed=11, **options)
    planned.plan(24)
    planned.prepare()
    ours = run(planned, 30)

    late = BreedSampler(BOX, seed=11, **options)
    computed = count_designs(monkeypatch)
    late.plan(24)
    assert computed == []  # (so the first draw computes it, as before)
    before = run(late, 1)
    assert computed == [0]
    before += run(late, 29, start=1)

    assert [{k: v.hex() for k, v in d.items()} for d in ours] == [
        {k: v.hex() for k, v in d.items()} for d in before
    ]
    assert planned.state_dict() == late.state_dict()
