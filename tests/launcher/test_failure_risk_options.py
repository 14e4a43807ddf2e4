"""The no-go zones' `risk` and `reach` (`launcher.failed_zones`) as options of the
samplers that keep zones (`SurrogateSampler`, `BreedSampler`): checked when the sampler
is built (a bad value names the option and what its range means), in the sampler's
state (a resume with others is refused; a state saved before they were options loads
with the values then hard-coded), and they move where the draws may go."""

from __future__ import annotations

import math

import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.failed_zones import REACH, RISK

pytestmark = pytest.mark.timeout(120)

#: one parameter: a failure at 0 and a success at 0.5 leave a clear band to test
LINE = {"x": (0.0, 1.0)}
KINDS = ("surrogate", "breed")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("option", "bad", "says"),
    [
        ("risk", 0.0, "in (0, 0.5]"),
        ("risk", 0.6, "0.5: the nearest-known-point rule alone"),
        ("risk", math.nan, "in (0, 0.5]"),
        ("risk", True, "in (0, 0.5]"),
        ("risk", "0.2", "in (0, 0.5]"),
        ("reach", -1.0, "finite number >= 0"),
        ("reach", math.inf, "finite number >= 0"),
        ("reach", None, "0: nowhere"),
    ],
)
def test_a_bad_risk_or_reach_is_refused_when_the_sampler_is_built(
    kind: str, option: str, bad: object, says: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{option} must") as e:
        make_sampler(kind, LINE, seed=0, **{option: bad})
    assert says in str(e.value) and repr(bad) in str(e.value)


@pytest.mark.parametrize("kind", KINDS)
def test_the_defaults_are_the_rule_s_constants(kind: str) -> None:
    sampler = make_sampler(kind, LINE, seed=0)
    assert (sampler.risk, sampler.reach) == (RISK, REACH) == (0.25, 3.0)  # type: ignore[attr-defined]
    edge = make_sampler(kind, LINE, seed=0, risk=0.5, reach=0)  # the ends are allowed
    assert (edge.risk, edge.reach) == (0.5, 0.0)  # type: ignore[attr-defined]


def lowest_draw(kind: str, **zone: float) -> float:
    """The lowest of 40 exploration draws (gap-filling: they fill every hole they may)
    after a failure at x = 0 and a success at x = 0.5 (`avoid` 0.1)."""
    options = {"exploration": 1.0} if kind == "surrogate" else {}
    sampler = make_sampler(kind, LINE, seed=3, **options, **zone)
    sampler.failed(0, {"x": 0.0})  # type: ignore[attr-defined]
    sampler.observe(1, {"x": 0.5}, 1.0)  # type: ignore[attr-defined]
    return min(sampler.draw()["x"] for _ in range(40))


@pytest.mark.parametrize("kind", KINDS)
def test_risk_and_reach_change_which_draws_are_avoided(kind: str) -> None:
    """Between the failure (0) and the success (0.5) a point x is banned within 0.1
    (`avoid`), nearer to the failure (x < 0.25), or within `reach` x 0.1 and less than
    (1 - risk) / risk times nearer to the success: by default (1/4, 3) x < 0.3 (the
    reach ends first); at risk 1/2, x < 0.25 (the nearest-point rule alone); with reach 5,
    x < 0.375 (3 times nearer to the success). Gap-filling draws go as low as allowed."""
    looser, default, longer = (
        lowest_draw(kind, risk=0.5),
        lowest_draw(kind),
        lowest_draw(kind, reach=5.0),
    )
    assert 0.25 <= looser < 0.3 <= default < 0.375 <= longer, (looser, default, longer)
    # a lower risk bans more only where it reaches: risk 0.1 wants 9 times nearer to the
    # success (x >= 0.45), but beyond 3 radii (0.3) the nearest-point rule alone holds
    assert 0.3 <= lowest_draw(kind, risk=0.1) < 0.375


@pytest.mark.parametrize("kind", KINDS)
def test_the_options_are_in_the_state_and_a_resume_with_others_is_refused(kind: str) -> None:
    sampler = make_sampler(kind, LINE, seed=1, risk=0.2, reach=2.0)
    sampler.draw()
    state = sampler.state_dict()
    assert (state["risk"], state["reach"]) == (0.2, 2.0)
    again = make_sampler(kind, LINE, seed=1, risk=0.2, reach=2.0)
    again.load_state_dict(state)
    assert again.draw() == sampler.draw()
    with pytest.raises(
        ValueError, match=r"sampler state has reach=2\.0 but this sampler has reach=3\.0"
    ):
        make_sampler(kind, LINE, seed=1, risk=0.2).load_state_dict(state)


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_saved_before_the_options_loads_with_the_values_then(kind: str) -> None:
    """Such a state was drawn with risk 1/4 and reach 3 (the constants): it loads into a
    sampler of the defaults, and a sampler of other values refuses it."""
    sampler = make_sampler(kind, LINE, seed=2)
    sampler.draw()
    state = sampler.state_dict()
    del state["risk"], state["reach"]
    again = make_sampler(kind, LINE, seed=2)
    again.load_state_dict(state)
    assert again.draw() == sampler.draw()
    with pytest.raises(ValueError, match="risk=0.25 but this sampler has risk=0.5"):
        make_sampler(kind, LINE, seed=2, risk=0.5).load_state_dict(state)
