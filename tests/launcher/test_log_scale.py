"""Parameters drawn on a log scale: a bound given as ``(low, high, "log")``
(`launcher.sampler_base.BoxSampler`, the one mapping of the unit cube to the box).

Every sampler, space-filling or adaptive, draws such a parameter log-uniformly and hands
the simulation the value itself; a bound that cannot be on a log scale is refused with
an error naming the parameter and the fix; a study resumed with other scales is refused.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.study_change import StudyChanged, check_resume
from melissa_trainer.launcher.study_record import StudyRecord

#: a viscosity over three decades, on a log scale, beside a linear parameter
BOUNDS: dict[str, Any] = {"nu": (0.001, 1.0, "log"), "a": (0.0, 1.0)}
KINDS = ["lhs", "uniform", "halton", "sobol", "breed", "surrogate", "density"]
N = 60


def draws(kind: str, bounds: Any = BOUNDS, n: int = N, seed: int = 3) -> list[dict[str, float]]:
    sampler = make_sampler(kind, bounds, seed=seed)
    sampler.plan(n)  # as the launcher does (the design size of "lhs" and "density")
    return [sampler.draw() for _ in range(n)]


@pytest.mark.parametrize("kind", KINDS)
def test_each_decade_gets_its_share_of_the_draws(kind: str) -> None:
    drawn = draws(kind)
    nu = np.array([d["nu"] for d in drawn])
    assert ((nu >= 0.001) & (nu <= 1.0)).all()  # the value itself, not its log
    per_decade = np.histogram(np.log10(nu), bins=[-3, -2, -1, 0])[0]
    # linearly, the bottom two decades would hold about 1% and 9% of the draws
    assert per_decade.min() >= N // 5, per_decade
    # the linear parameter beside it is still drawn linearly
    a = np.array([d["a"] for d in drawn])
    assert np.histogram(a, bins=3, range=(0, 1))[0].min() >= N // 5


def test_a_latin_hypercube_puts_one_draw_in_each_log_stratum() -> None:
    nu = np.array([d["nu"] for d in draws("lhs", n=30)])
    strata = np.floor((np.log10(nu) + 3) / 3 * 30).astype(int)
    assert sorted(strata.clip(0, 29).tolist()) == list(range(30))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_docs_bottom_quarter_figures(seed: int) -> None:
    """docs/concepts/study.md: an LHS of 40 over (0.003, 0.05) puts 2 or 3 draws in the
    bottom quarter of the log range linearly, 10 on the log scale."""
    quarter = 0.003 * (0.05 / 0.003) ** 0.25
    assert round(quarter, 4) == 0.0061
    for scale, expected in (((), {2, 3}), (("log",), {10})):
        nu = [d["nu"] for d in draws("lhs", {"nu": (0.003, 0.05, *scale)}, n=40, seed=seed)]
        assert sum(v < quarter for v in nu) in expected


def test_the_linear_draws_are_unchanged() -> None:
    linear = {"nu": (0.001, 1.0), "a": (0.0, 1.0)}
    for kind in KINDS:
        assert draws(kind, {"nu": (0.001, 1.0, "linear"), "a": (0.0, 1.0)}) == draws(kind, linear)
        assert "log_scale" not in make_sampler(kind, linear).state_dict()


def test_an_adaptive_sampler_steers_on_the_log_scale() -> None:
    """Breed's children of a parent at nu = 0.002 lie mostly within a factor 3 of it (its
    spread `sigma` is a share of the log range), not spread linearly up to 0.1 and more."""
    sampler = make_sampler("breed", BOUNDS, seed=1, exploration=0.0, min_observations=1)
    sampler.plan(20)
    sampler.observe(0, {"nu": 0.002, "a": 0.5}, 1.0)
    nu = np.array([sampler.draw()["nu"] for _ in range(20)])
    assert ((nu > 0.002 / 3) & (nu < 0.002 * 3)).sum() >= 15, nu
    assert sampler._unit({"nu": 0.01, "a": 0.25}) == pytest.approx([1 / 3, 0.25])


@pytest.mark.parametrize("parent", [0.001**0.5, 0.001])
def test_breed_steps_a_log_parameter_by_a_factor_and_reflects_it_as_a_ratio(parent: float) -> None:
    """`sigma` is a share of ``ln(high / low)`` for a log-scale parameter (its docstring):
    ``ln(child / parent)`` has std ``sigma * ln(1000)`` in the middle of the range, and a
    parent at `low` has children ``low * exp(|N|)`` (reflected in the log, none below)."""
    sigma, n = 0.05, 400
    sampler = make_sampler("breed", BOUNDS, seed=2, exploration=0.0, min_observations=1,
                           sigma=sigma)  # fmt: skip
    sampler.plan(n)
    sampler.observe(0, {"nu": parent, "a": 0.5}, 1.0)
    drawn = [sampler.draw() for _ in range(n)]
    steps = np.log(np.array([d["nu"] for d in drawn]) / parent)
    a = np.array([d["a"] for d in drawn])
    expected = sigma * np.log(1000.0)  # 0.345: a factor of 1.41 a std
    if parent > 0.001:
        assert np.std(steps) == pytest.approx(expected, rel=0.1)
        assert abs(np.mean(steps)) < 0.2 * expected  # symmetric in the log, not in nu
    else:
        assert steps.min() >= 0.0  # reflected at low: no child below it
        assert np.mean(steps) == pytest.approx(expected * np.sqrt(2 / np.pi), rel=0.1)
    assert np.std(a - 0.5) == pytest.approx(sigma * 1.0, rel=0.1)  # linear: sigma * (high - low)


def test_a_fixed_log_parameter_is_its_value() -> None:
    for kind in KINDS:
        assert {d["nu"] for d in draws(kind, {"nu": (0.3, 0.3, "log"), "a": (0, 1)}, n=5)} == {0.3}


@pytest.mark.parametrize(
    ("bound", "message"),
    [
        ((0.0, 1.0, "log"), r"bounds of 'nu' are on a log scale but low=0: .*raise low above 0, "
         r"or give 'nu' as \(low, high\) to draw it linearly"),
        ((-1.0, 1.0, "log"), "'nu' are on a log scale but low=-1"),
        ((0.1, 1.0, "log10"), r"of 'nu' end with the scale 'log10' \(did you mean \"log\"\?"
         r".*\(low, high, \"log\"\)"),
        ((1.0, 0.1, "log"), "need low <= high, not low=1 > high=0.1"),
    ],
)  # fmt: skip
def test_a_bad_log_bound_is_refused_naming_the_parameter_and_the_fix(
    bound: Any, message: str
) -> None:
    for kind in ("lhs", "breed"):
        with pytest.raises(ValueError, match=message):
            make_sampler(kind, {"nu": bound, "a": (0.0, 1.0)})


def study(bounds: Any, kind: str = "sobol", n: int = 6) -> StudyRecord:
    sampler = make_sampler(kind, bounds, seed=1)
    sampler.plan(n)  # as the launcher does
    return StudyRecord(sampler, n, max_restarts=0, on_failure="raise", max_redraws=0,
                       first_simulation_id=0)  # fmt: skip


def saved_state(record: StudyRecord) -> dict[str, Any]:
    """The launcher state a checkpoint holds after two draws."""
    for _ in range(2):
        record.take(0.0)
    return json.loads(json.dumps(record.state_dict()))


@pytest.mark.parametrize("kind", ["sobol", "breed"])
def test_a_log_scale_study_resumes_and_continues_its_draws(kind: str) -> None:
    first = study(BOUNDS, kind)
    state = saved_state(first)
    assert state["settings"]["log_scale"] == ["nu"]
    resumed = study(BOUNDS, kind)
    saved = check_resume(state, resumed)
    resumed.sampler.load_state_dict(saved.sampler)
    assert resumed.sampler.draw() == first.sampler.draw()


@pytest.mark.parametrize(
    ("saved_bounds", "new_bounds", "old", "new"),
    [
        (BOUNDS, {"nu": (0.001, 1.0), "a": (0.0, 1.0)}, "['nu']", "[]"),
        ({"nu": (0.001, 1.0), "a": (0.0, 1.0)}, BOUNDS, "[]", "['nu']"),
    ],
)
def test_a_study_resumed_with_another_scale_is_refused(
    saved_bounds: Any, new_bounds: Any, old: str, new: str
) -> None:
    state = saved_state(study(saved_bounds))
    with pytest.raises(StudyChanged, match=rf"log-scale parameters changed from \{old} to \{new}"):
        check_resume(state, study(new_bounds))
    # a checkpoint without the settings is still refused, by the sampler's state
    del state["settings"]
    with pytest.raises(StudyChanged, match="log_scale="):
        check_resume(state, study(new_bounds))
