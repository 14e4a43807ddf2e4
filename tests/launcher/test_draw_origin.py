"""How each draw was made, as the study's draws.csv says it (`draw_log.draw_origin`):
the surrogate acquisition's draws are ``explored`` or ``acquired``, Breed's ``explored``
or ``bred`` (with the parent it names), a fixed design's the sampler's kind. The
oracle: the samplers' own counts (`explored`, `position`) and Breed's `last_parent`."""

from __future__ import annotations

import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.draw_log import draw_origin, explored_count


def origins(kind: str, n: int, **options: object) -> list[tuple[str, int | None]]:
    sampler = make_sampler(kind, {"k": (0.0, 1.0), "c": (0.3, 0.7)}, seed=7, **options)
    made = []
    for sid in range(n):
        before = explored_count(sampler)
        drawn = sampler.draw()
        made.append(draw_origin(sampler, before))
        if hasattr(sampler, "observe"):
            sampler.observe(sid, drawn, loss=1.0 + 5.0 * drawn["k"] ** 4)
    if kind in ("surrogate", "breed"):
        explored = getattr(sampler, "explored")  # noqa: B009 - (typed as a Sampler)
        assert sum(1 for how, _ in made if how == "explored") == explored
        assert len(made) - explored > 0  # some steered: the test can fail
    return made


@pytest.mark.timeout(60)
def test_the_surrogate_s_draws_are_explored_or_acquired() -> None:
    made = origins("surrogate", 20)
    assert {how for how, _ in made} == {"explored", "acquired"}
    assert all(parent is None for _, parent in made)


@pytest.mark.timeout(60)
def test_breed_s_bred_draws_name_an_earlier_parent() -> None:
    made = origins("breed", 20, exploration=0.3, min_observations=1)
    for sid, (how, parent) in enumerate(made):
        assert how in ("explored", "bred")
        assert (parent is not None and 0 <= parent < sid) if how == "bred" else parent is None


@pytest.mark.timeout(60)
def test_a_fixed_design_s_draws_are_its_kind() -> None:
    assert origins("sobol", 3) == [("sobol", None)] * 3
