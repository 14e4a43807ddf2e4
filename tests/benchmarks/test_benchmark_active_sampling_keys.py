"""benchmarks/active_sampling.py's keys of recorded runs (`active_sampling_keys`): a
run's key holds the explorer and the options its arm resolves to, so that a second
invocation reuses the run recorded with the same settings, and only that one (the
command: test_benchmark_active_sampling.py)."""

from __future__ import annotations

import json
from dataclasses import replace

from active_sampling_bench import (
    RESULTS,
    bench_module,
    keys_module,
)


def test_a_run_s_key_holds_the_explorer_it_resolves_to_and_not_breed_for_fixed_designs() -> None:
    bench, keys = bench_module(), keys_module()
    main_breed = {
        "exploration": 0.7,
        "sigma": 0.15,
        "floor": 0.5,
        "min_observations": 8,
        "candidates": 16,
    }  # fmt: skip  (the options the first runs were keyed with)

    def key(space: str, kind: str, **breed: object) -> str:
        return keys.fingerprint(bench.Setup(space=space, breed=breed), 200, 100, kind)

    # the Sobol' explorer named: the first runs' key (as recorded in benchmarks/results);
    # unnamed, the default "auto": Sobol' with the walls' 3 parameters, LHS with 6
    first = {"walls": "78dfdbab05991906", "full": "bfb257bf8a2f6c9d"}
    for space in ("walls", "full"):
        plain = key(space, "breed", **main_breed, explorer="sobol")
        assert plain == first[space]
        assert key(space, "breed", **main_breed, explorer="lhs") != plain
        assert key(space, "breed", **{**main_breed, "exploration": 1.0}) != plain
    assert key("walls", "breed", **main_breed) == first["walls"]
    assert key("full", "breed", **main_breed) == key("full", "breed", **main_breed, explorer="lhs")
    # the fixed designs: whatever Breed's options, the key of the first runs
    assert key("full", "sobol", explorer="lhs", exploration=1.0) == key("full", "sobol")


def test_a_density_run_s_key_holds_the_options_it_resolves_to() -> None:
    bench, keys = bench_module(), keys_module()

    def key(**density: object) -> str:
        setup = bench.Setup(space="wide", steps=4000, simulations=96, density=density)
        return keys.fingerprint(setup, 200, 100, "density")

    # the third round's evaluation runs (benchmarks/results), recorded with no option named
    lines = (RESULTS / "active_sampling_density_wide96_a.jsonl").read_text().splitlines()
    third = {json.loads(line)["fingerprint"] for line in lines if '"density"' in line}
    old = {**keys.RECORDED_DENSITY, **{"contrast": None}}
    assert key(**old) == key(share=0.5, contrast=None) == third.pop() and not third
    # the default's contrast "auto" is 0.25 with 12 parameters: the fourth round's key
    assert key() == key(contrast=0.25) != key(**old)
    assert key(contrast=0.4) == key(**{**keys.DENSITY_DEFAULTS, "contrast": 0.4})
    # with 6 it is none: the second round's runs keep their key
    full = bench.Setup(space="full", steps=4000)
    assert keys.fingerprint(full, 200, 100, "density") == keys.fingerprint(
        replace(full, density={"contrast": None}), 200, 100, "density"
    )
    lines = (RESULTS / "active_sampling_density_full_a.jsonl").read_text().splitlines()
    recorded = {json.loads(line)["fingerprint"] for line in lines if '"density"' in line}
    assert recorded == {keys.fingerprint(full, 200, 100, "density")}


def test_breed_s_default_keeps_the_walls_runs_and_is_the_lhs_explorer_in_the_full_space() -> None:
    bench, keys = bench_module(), keys_module()

    def key(space: str, **breed: object) -> str:
        return keys.fingerprint(bench.Setup(space=space, breed=breed), 200, 100, "breed")

    # the keys of the second round's evaluation runs of the Sobol' explorer (recorded in
    # benchmarks/results/active_sampling_{walls,full}_explore_*.jsonl)
    walls, full_sobol = "a5efe0eb0311819b", "e7ee4106a6c95c47"
    assert key("walls", **bench.BREED) == key("walls", **bench.BREED, explorer="sobol") == walls
    assert key("full", **bench.BREED, explorer="sobol") == full_sobol
    # the default's explorer "auto" is the Latin hypercube in its order with six parameters:
    # the key of the third round's tuning runs of that candidate
    lhs = key("full", **bench.BREED, explorer="lhs", candidates=1)
    assert key("full", **bench.BREED) == key("full", **bench.BREED, explorer="lhs") == lhs
    assert lhs not in (full_sobol, key("full", **bench.BREED, explorer="lhs", candidates=16))
    lines = (RESULTS / "active_sampling_walls_explore_1000.jsonl").read_text().splitlines()
    recorded = {json.loads(line)["fingerprint"] for line in lines}
    assert recorded == {walls}
