"""The heat example's held-out set (user trial: 4 held-out simulations made its "99th
percentile" and "worst" one number): large by default, the same whatever the run's
seed (two samplers' runs are judged on one set), spread over the whole parameter box
with corners of it among them, and what an adaptive run prints on how to judge it."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from heat_pde import held_out, train
from heat_pde.solver import PARAMETER_BOUNDS, PARAMETER_NAMES


def as_array(points: list[dict[str, float]]) -> np.ndarray:
    return np.array([[p[n] for n in PARAMETER_NAMES] for p in points])


def test_the_default_held_out_set_is_large_enough_for_tails() -> None:
    (field,) = [f for f in dataclasses.fields(train.HeatArgs) if f.name == "num_validation"]
    assert field.default >= 16  # was 4: its p99 was its worst


@pytest.mark.parametrize("count", [1, 4, 7, 32, 200])
def test_held_out_points_fill_the_box_with_corners_among_them(count: int) -> None:
    points = as_array(held_out.held_out_parameters(count))
    low = np.array([PARAMETER_BOUNDS[n][0] for n in PARAMETER_NAMES])
    high = np.array([PARAMETER_BOUNDS[n][1] for n in PARAMETER_NAMES])
    assert points.shape == (count, len(PARAMETER_NAMES))
    assert np.all(points >= low) and np.all(points <= high)
    at_bounds = np.all((points == low) | (points == high), axis=1)
    corners = min(-(-count // 4), 2 ** len(PARAMETER_NAMES))  # a quarter, at most all 32
    assert at_bounds.sum() == corners and at_bounds[:corners].all()
    assert len({tuple(p) for p in points[:corners]}) == corners  # distinct corners
    assert len({tuple(p) for p in points}) == count  # no point twice
    if count >= 32:  # the others spread over the box: every half of every axis visited
        inside = points[corners:]
        middle = (low + high) / 2
        for k in range(len(PARAMETER_NAMES)):
            assert (inside[:, k] < middle[k]).any() and (inside[:, k] > middle[k]).any()


def test_the_held_out_set_is_the_same_at_every_call() -> None:
    """The same points at every call (no dependence on the run's --seed); another seed
    gives another set."""
    a, b = held_out.held_out_parameters(32), held_out.held_out_parameters(32)
    assert a == b
    assert as_array(a).tolist() != as_array(held_out.held_out_parameters(32, seed=1)).tolist()


def test_a_corner_is_exactly_every_temperature_at_one_of_its_bounds() -> None:
    every = {tuple(c) for c in itertools.product(*(PARAMETER_BOUNDS[n] for n in PARAMETER_NAMES))}
    points = held_out.held_out_parameters(4 * 32)
    assert {tuple(p[n] for n in PARAMETER_NAMES) for p in points[:32]} == every


def test_an_adaptive_run_is_told_the_ab_against_the_plain_design() -> None:
    hint = held_out.judging_hint("surrogate", 7, 64)
    lines = hint.splitlines()
    ours = next(line for line in lines if "--sampler surrogate" in line and "python" in line)
    plain = next(line for line in lines if "--sampler lhs" in line)
    for line in (ours, plain):  # the same seeds, several of them, each arm its own folder
        assert "--seed 7" in line and "--seeds 3" in line and "--num_simulations" not in line
    assert "ab-surrogate" in ours and "ab-lhs" in plain
    assert "--num_simulations 16" in held_out.judging_hint("breed", 0, 16)
    assert set(held_out.ADAPTIVE) == {"breed", "density", "surrogate"}
