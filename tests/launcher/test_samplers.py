"""Parameter samplers: seeded, reproducible, resumable, and what each one promises."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy.stats import qmc

from melissa_trainer.launcher.latin_hypercube import LatinHypercubeSampler
from melissa_trainer.launcher.sampler_base import Sampler, SamplerExhausted
from melissa_trainer.launcher.samplers import (
    CallableSampler,
    HaltonSampler,
    ListSampler,
    SobolSampler,
    UniformSampler,
    make_sampler,
)

BOUNDS = {"t0": (100.0, 500.0), "a": (-1.0, 1.0), "b": (0.0, 10.0)}
KINDS = ["uniform", "lhs", "halton", "sobol"]


def draws(sampler: Sampler, n: int) -> list[dict[str, float]]:
    return [sampler.draw() for _ in range(n)]


def box(kind: str, seed: int = 0, **options: Any) -> Sampler:
    sampler = make_sampler(kind, BOUNDS, seed=seed, **options)
    sampler.plan(8)  # what the launcher does (the Latin hypercube's design size)
    return sampler


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_sequence_other_seed_other_sequence(kind: str) -> None:
    first = draws(box(kind, seed=7), 20)
    assert first == draws(box(kind, seed=7), 20)
    assert first != draws(box(kind, seed=8), 20)
    assert len({tuple(d.values()) for d in first}) == 20  # no repeats
    for d in first:
        assert list(d) == list(BOUNDS)
        assert all(BOUNDS[k][0] <= v <= BOUNDS[k][1] for k, v in d.items())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cut", [0, 3, 8, 13])
def test_a_resumed_sampler_continues_the_sequence_exactly(kind: str, cut: int) -> None:
    reference = draws(box(kind, seed=3), 20)
    sampler = box(kind, seed=3)
    assert draws(sampler, cut) == reference[:cut]
    state = json.loads(json.dumps(sampler.state_dict()))  # JSON round trip, as in a checkpoint
    assert state["position"] == cut
    resumed = box(kind, seed=3)
    resumed.load_state_dict(state)
    assert draws(resumed, 20 - cut) == reference[cut:]


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_of_another_seed_or_space_is_refused(kind: str) -> None:
    state = box(kind, seed=1).state_dict()
    with pytest.raises(ValueError, match="seed"):
        box(kind, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="names"):
        make_sampler(kind, {"other": (0, 1)}, seed=1).load_state_dict(state)
    other = "sobol" if kind != "sobol" else "halton"
    with pytest.raises(ValueError, match="kind"):
        box(other, seed=1).load_state_dict(state)


def test_latin_hypercube_hits_every_stratum_once_per_design() -> None:
    sampler = LatinHypercubeSampler(BOUNDS, seed=5, batch=10)
    for _ in range(2):  # two consecutive designs
        design = np.array([list(d.values()) for d in draws(sampler, 10)])
        low = np.array([lo for lo, _ in BOUNDS.values()])
        span = np.array([hi - lo for lo, hi in BOUNDS.values()])
        strata = np.floor((design - low) / span * 10).astype(int)
        for column in strata.T:
            assert sorted(column) == list(range(10))


def test_latin_hypercube_design_size_comes_from_plan_or_batch() -> None:
    unplanned = LatinHypercubeSampler(BOUNDS)
    with pytest.raises(ValueError, match="batch"):
        unplanned.draw()
    planned = LatinHypercubeSampler(BOUNDS, seed=2)
    planned.plan(6)
    assert planned.batch == 6
    assert draws(planned, 6) == draws(LatinHypercubeSampler(BOUNDS, seed=2, batch=6), 6)
    resumed = LatinHypercubeSampler(BOUNDS, seed=2)  # the saved batch is adopted
    resumed.load_state_dict(planned.state_dict())
    assert resumed.batch == 6
    with pytest.raises(ValueError, match="batch"):
        LatinHypercubeSampler(BOUNDS, seed=2, batch=5).load_state_dict(planned.state_dict())


@pytest.mark.parametrize("cls", [HaltonSampler, SobolSampler])
def test_low_discrepancy_samplers_are_scipy_sequences(cls: type[Any]) -> None:
    engine = {HaltonSampler: qmc.Halton, SobolSampler: qmc.Sobol}[cls]
    ours = np.array([list(d.values()) for d in draws(cls(BOUNDS, seed=4), 16)])
    scipy_points = qmc.scale(
        engine(3, rng=np.random.default_rng(4)).random(16),
        [lo for lo, _ in BOUNDS.values()],
        [hi for _, hi in BOUNDS.values()],
    )
    np.testing.assert_allclose(ours, scipy_points, rtol=1e-12)
    unscrambled = cls(BOUNDS, scramble=False)
    assert unscrambled.draw() == {"t0": 100.0, "a": -1.0, "b": 0.0}  # the sequence's origin


def test_uniform_sampler_is_uniform_in_its_box() -> None:
    values = np.array([d["a"] for d in draws(UniformSampler({"a": (-1, 1)}, seed=0), 4000)])
    assert values.min() >= -1 and values.max() <= 1
    assert abs(values.mean()) < 0.05
    assert np.histogram(values, bins=4, range=(-1, 1))[0].min() > 900


def test_list_sampler_gives_its_sets_in_order_then_raises() -> None:
    sets = [{"x": 1, "y": 2.5}, {"y": 0, "x": -3}]
    sampler = ListSampler(sets)
    assert sampler.names == ("x", "y") and len(sampler) == 2
    assert sampler.draw() == {"x": 1.0, "y": 2.5}
    resumed = ListSampler(sets)
    resumed.load_state_dict(sampler.state_dict())
    assert resumed.draw() == {"x": -3.0, "y": 0.0}
    with pytest.raises(SamplerExhausted, match="2 parameter sets"):
        resumed.draw()
    with pytest.raises(ValueError, match="exactly"):
        ListSampler([{"x": 1}, {"z": 1}])
    with pytest.raises(ValueError, match="not finite"):
        ListSampler([{"x": float("nan")}])
    with pytest.raises(ValueError, match="at least one"):
        ListSampler([])


def test_callable_sampler_passes_index_and_a_seeded_generator() -> None:
    seen: list[int] = []

    def fn(i: int, rng: np.random.Generator) -> dict[str, float]:
        seen.append(i)
        return {"k": float(i), "noise": float(rng.normal())}

    sampler = CallableSampler(fn, ["k", "noise"], seed=9)
    first = draws(sampler, 5)
    assert seen == [0, 1, 2, 3, 4] and [d["k"] for d in first] == [0, 1, 2, 3, 4]
    again = CallableSampler(fn, ["k", "noise"], seed=9)
    again.load_state_dict(CallableSampler(fn, ["k", "noise"], seed=9).state_dict())
    assert draws(again, 5) == first
    resumed = CallableSampler(fn, ["k", "noise"], seed=9)
    resumed.load_state_dict(sampler.state_dict())
    assert resumed.draw() == draws(CallableSampler(fn, ["k", "noise"], seed=9), 6)[5]
    bad = CallableSampler(lambda i, rng: {"k": 1.0}, ["k", "noise"])
    with pytest.raises(ValueError, match="exactly"):
        bad.draw()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_sampler("random", BOUNDS), "unknown sampler"),
        (lambda: make_sampler("uniform", {"a": (1, 0)}), "low <= high"),
        (lambda: make_sampler("uniform", {"a": (0, float("inf"))}), "finite"),
        (lambda: make_sampler("uniform", {}), "non-empty"),
        (lambda: make_sampler("uniform", {"a": 3}), r"\(low, high\)"),
        (lambda: make_sampler("halton", BOUNDS, batch=3), "bad option"),
        (lambda: make_sampler("lhs", BOUNDS, batch=0), "batch"),
        (lambda: make_sampler("uniform", BOUNDS, seed=-1), "seed"),
    ],
)
def test_bad_configuration_is_refused_with_a_clear_message(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("kind", "options", "expected"),
    [
        # a misspelling: the option meant, then every option the sampler takes
        (
            "density",
            {"shares": 0.5},
            "bad option for the 'density' sampler: no option 'shares' (did you mean 'share'?); "
            "its options are share, quantile, bandwidth, window, min_observations, tilt, "
            "candidates, evidence, edge, contrast",
        ),
        (
            "breed",
            {"sigmaa": 0.1},
            "bad option for the 'breed' sampler: no option 'sigmaa' (did you mean 'sigma'?); "
            "its options are exploration, exploration_final, decay_draws, window, "
            "min_observations, sigma, power, floor, explorer, candidates, memory, avoid, "
            "risk, reach",
        ),
        # another sampler's option: where it belongs
        (
            "lhs",
            {"exploration": 0.7},
            "bad option for the 'lhs' sampler: no option 'exploration'; its options are batch "
            "('exploration' is an option of 'breed' and 'surrogate')",
        ),
        (
            "uniform",
            {"batch": 3},
            "bad option for the 'uniform' sampler: no option 'batch'; "
            "it takes none ('batch' is an option of 'lhs')",
        ),
    ],
)
def test_an_unknown_option_names_the_option_meant_and_the_options_taken(
    kind: str, options: dict[str, Any], expected: str
) -> None:
    """Not Python's `__init__() got an unexpected keyword argument`: the sampler's own
    options (listed here by hand, from the page's tables), and the likely fix."""
    with pytest.raises(ValueError) as raised:
        make_sampler(kind, BOUNDS, seed=0, **options)
    assert str(raised.value) == expected


def test_a_fixed_parameter_is_allowed() -> None:
    sampler = make_sampler("sobol", {"a": (2.0, 2.0), "b": (0, 1)})
    assert {d["a"] for d in draws(sampler, 4)} == {2.0}
