"""Bounds whose every parameter is fixed (`low == high`, "fixes the parameter at that
value", docs/concepts/study.md "Samplers") with an adaptive sampler (user trial 31,
MEDIUM): accepted, as by every sampler; every draw is the one fixed point, before and
after observations and failures, and resumes exactly.

Before the fix the first draw after a simulation given up raised numpy's "cannot
reshape array of size 0 into shape (0)" (`AdaptiveSampler._known`, and the same
reshape in the "lhs" replacements and `Exploration.remember_only`), and a "density"
sampler with ``candidates > 1`` failed its second draw ("need at least one array to
stack")."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from launcher_said import one_line

from melissa_trainer import make_sampler
from melissa_trainer.launcher.sampler_account import warn_static_sampler

pytestmark = pytest.mark.timeout(120)

FIXED = {"nu": (0.01, 0.01), "c": (0.5, 0.5)}
POINT = {"nu": 0.01, "c": 0.5}

#: every adaptive kind, on the paths its options choose, and "lhs" (its replacements)
CASES: list[tuple[str, dict[str, Any]]] = [
    ("surrogate", {}),
    ("surrogate", {"exploration": 0.0, "min_observations": 3}),
    ("breed", {}),
    ("breed", {"exploration": 0.0, "min_observations": 2, "explorer": "lhs"}),
    ("density", {}),
    ("density", {"candidates": 8}),
    ("density", {"candidates": 8, "evidence": 0.0, "edge": 1.0}),
    ("lhs", {"batch": 4}),
]


@pytest.mark.parametrize("kind", ["surrogate", "breed"])
def test_all_fixed_adaptive_sampler_after_a_failure(kind: str) -> None:
    # the trial's case: one draw, one observation, one simulation given up
    sampler = make_sampler(kind, FIXED, seed=0)
    sampler.prepare()
    parameters = sampler.draw()
    sampler.observe(0, parameters, 1.0)
    sampler.failed(1, parameters)
    assert sampler.draw() == POINT


def study(sampler: Any, start: int, n: int) -> list[dict[str, float]]:
    """Draws `start` .. `start + n - 1`, each observed at once; two given up."""
    draws = []
    for i in range(start, start + n):
        parameters = sampler.draw()
        draws.append(parameters)
        if hasattr(sampler, "observe"):
            sampler.observe(i, parameters, 1.0 + i % 3)
        if i in (3, 9):
            sampler.failed(i, parameters)
    return draws


@pytest.mark.parametrize(("kind", "options"), CASES)
def test_every_draw_is_the_fixed_point_and_resumes(kind: str, options: dict[str, Any]) -> None:
    sampler = make_sampler(kind, FIXED, seed=0, **options)
    sampler.plan(6)  # (as a Launcher: the plan when built, the replacements after it)
    sampler.prepare()
    assert study(sampler, 0, 24) == [POINT] * 24
    state = json.loads(json.dumps(sampler.state_dict()))
    rest = study(sampler, 24, 6)
    resumed = make_sampler(kind, FIXED, seed=0, **options)
    resumed.plan(6)
    resumed.load_state_dict(state)
    resumed.prepare()
    assert study(resumed, 24, 6) == rest == [POINT] * 6


#: options with which each adaptive kind can steer a study of 100 simulations
STEERING = {"surrogate": {}, "breed": {"exploration": 0.5}, "density": {}}


@pytest.mark.parametrize("kind", list(STEERING))
def test_the_study_start_says_that_nothing_can_adapt(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    warn_static_sampler(make_sampler(kind, FIXED, seed=0, **STEERING[kind]), 100)
    assert [one_line(r.getMessage()) for r in caplog.records if r.levelno == logging.WARNING] == [
        f"the {kind!r} sampler cannot steer any draw of this study: every parameter is "
        "fixed (low == high): every draw is the one fixed point. Its draws are its "
        "design's; the per-simulation losses are tracked all the same"
    ]
    caplog.clear()
    warn_static_sampler(make_sampler(kind, {**FIXED, "c": (0.5, 0.6)}, **STEERING[kind]), 100)
    assert not caplog.records  # (one varying parameter: it can)
