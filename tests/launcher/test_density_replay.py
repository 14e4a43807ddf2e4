"""`DensitySampler`'s draws, bit for bit, as the code before issue 46's seventh round
(commit adbd5be) made them: its cuts of the draw's CPU (the density's tabulations on
a grid computed once, ranks' sums in closed form, the warp's parts computed once per
draw) change no value.

The oracle is `tests/data/density_replay_adbd5be.json`, written by this file's
`record()` with the code of adbd5be (``python tests/launcher/test_density_replay.py``
there): for several option sets and seeds, every draw of a replayed study (each draw
preceded by the observations a study makes: the simulations so far, their losses
drifting, the oldest re-observed) and the final `state_dict()`, floats as
``float.hex``, kept as the SHA-256 of their JSON (the first draw that differs is
found by running the recorder at both commits). Except the `tilt` entries: re-recorded
when the scores' linear trend and the kernel regression stopped going through
BLAS/LAPACK (`lstsq`, a matrix-vector product), whose summation order depends on the
kernel OpenBLAS picks for the CPU: adbd5be's `tilt` draws were that machine's
(OpenBLAS's SkylakeX kernels), and three kernels gave three studies on one machine.
`test_the_draws_do_not_depend_on_the_blas_kernel` holds that. And the `window` entries:
re-recorded with adbd5be's code itself (its package on the path, this file's `replay`
less what states gained since) when their ``evidence`` became 2.5: with the default
3, no parameter of 9 losses kept can reach it (at most sqrt(8)), a setting refused
since (`launcher.sampler_options`); the recorder reproduced the old entries first."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import beta

from melissa_trainer.launcher import DensitySampler
from melissa_trainer.launcher.sampler_base import qmc_engine

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "density_replay_adbd5be.json"
#: 11 varying parameters and a fixed one (the issue's wide space has 12 varying)
SPACE = {**{f"p{i}": (0.0, 10.0) for i in range(11)}, "fixed": (3.0, 3.0)}
DRAWS = 24
#: option sets: the defaults (contrast "auto" is on at 11 varying parameters), the
#: kernel regression, no evidence, candidates, a narrow window, a uniform edge, contrast off
CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "tilt": {"tilt": 2.0, "evidence": 0.0},
    "evidence0": {"evidence": 0.0, "quantile": 0.5, "bandwidth": 0.05},
    "candidates": {"candidates": 4},
    "window": {"window": 9, "min_observations": 8, "contrast": 0.5, "evidence": 2.5},
    "edge1": {"edge": 1.0, "contrast": None},
}
SEEDS = (0, 1)


def loss_of(parameters: dict[str, float], age: int) -> float:
    """High where p0 and p1 are high, with a contrast effect on p2 - p3; drifting with
    the age of the report (as a study's relative losses do)."""
    p = parameters
    hard = math.exp(0.4 * p["p0"]) * (1.0 + 0.1 * p["p1"]) + abs(p["p2"] - p["p3"])
    return hard * (1.0 + 0.01 * age)


def encode(value: Any) -> Any:
    """`value` with every float as its hex (JSON keeps the bits)."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def replay(options: dict[str, Any], seed: int) -> dict[str, Any]:
    """A study's draws and observations, replayed: before each draw, every simulation
    drawn so far observed (its loss drifting with the draw's number), the oldest kept
    again last (a re-observation: the newest)."""
    sampler = DensitySampler(SPACE, seed=seed, **options)
    sampler.plan(DRAWS)
    draws: list[dict[str, float]] = []
    held = []  # the observations kept at each draw: the oracle of the state's counts
    bent: list[bool] = []  # whether the loss bent each draw: the oracle of `bent`
    for i in range(DRAWS):
        for sid, parameters in enumerate(draws):
            sampler.observe(sid, parameters, loss_of(parameters, i))
        if sampler.observations:
            oldest = sampler.observations[0]
            sampler.observe(oldest.simulation_id, oldest.parameters, oldest.loss * 1.5)
        held.append(len(sampler.observations))
        bent.append(loss_bends(sampler))
        draws.append(sampler.draw())
    state = since_adbd5be(sampler.state_dict(), held, options.get("min_observations", 8), seed)
    assert state.pop("bent") == sum(bent)  # (gained after adbd5be: its own oracle)
    return {"draws": digest(encode(draws)), "state": digest(encode(state)),
            "warped": sampler.warped}  # fmt: skip


def loss_bends(sampler: DensitySampler) -> bool:
    """Whether the sampler's next draw is bent by the loss: some varying parameter's
    distribution function differs, value by value, from the design's marginal
    (Beta(edge, edge), computed here with scipy; the grid itself with edge 1)."""
    warps = sampler.warp()  # (memoised: the draw that follows computes nothing again)
    if warps is None:
        return False
    grid = np.linspace(0.0, 1.0, len(warps[0][0]))
    base = grid if sampler.edge == 1.0 else beta.cdf(grid, sampler.edge, sampler.edge)
    return any(not np.array_equal(cdf, base) for cdf, _ in warps)


def since_adbd5be(state: dict[str, Any], held: list[int], least: int, seed: int) -> dict[str, Any]:
    """`state` without what states gained after adbd5be, each checked against its own
    oracle when there (`test_the_state_holds_the_design_and_the_draws_counts` holds
    that it is): the design held (the optimised Latin hypercube of the budget, seeded
    with ``[seed, 31, 0]``, scipy's, computed here) and the draws' counts of
    observations (`held`: those kept at each draw; `least`: `min_observations`)."""
    state = dict(state, design_state=dict(state["design_state"]))
    design = state["design_state"].pop("design", None)
    if design is not None:
        lhs = qmc_engine("LatinHypercube", 11, [seed, 31, 0], optimization="random-cd")
        assert design["block"] == 0 and design["points"] == lhs.random(DRAWS).tolist()
    if "observed_at_draw" in state:
        assert state.pop("observed_at_draw") == held[-1]
        assert state.pop("adaptive_draws") == sum(1 for n in held if n >= least)
    return state


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def record() -> dict[str, Any]:
    return {f"{name}/{seed}": replay(options, seed) for name, options in CASES.items()
            for seed in SEEDS}  # fmt: skip


def grid() -> list[Any]:
    """Every option set with every seed. The inner tier runs each option set once, the
    seeds in turn (6 of 12: the other six repeat an option set with other values); they
    carry the ``e2e`` marker: the full suite runs all 12."""
    return [
        pytest.param(name, seed, marks=() if seed == SEEDS[i % len(SEEDS)] else pytest.mark.e2e)
        for i, name in enumerate(CASES)
        for seed in SEEDS
    ]


@pytest.mark.parametrize(("name", "seed"), grid())
def test_the_draws_are_those_of_the_code_before_bit_for_bit(name: str, seed: int) -> None:
    expected = json.loads(GOLDEN.read_text())[f"{name}/{seed}"]
    got = replay(CASES[name], seed)
    assert got["draws"] == expected["draws"], f"{name}, seed {seed}: the draws differ"
    assert got == expected, f"{name}, seed {seed}: the state differs"
    assert got["warped"] > 0 or CASES[name].get("share") == 0.0


def test_the_state_holds_the_design_and_the_draws_counts() -> None:
    """What `since_adbd5be` checks is in a replayed study's state (a resume takes the
    design from it, and the study's account the counts)."""
    sampler = DensitySampler(SPACE, seed=0)
    sampler.plan(DRAWS)
    for _ in range(3):
        sampler.draw()
    state = sampler.state_dict()
    assert state["design_state"]["design"]["block"] == 0
    assert (state["observed_at_draw"], state["adaptive_draws"]) == (0, 0)


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="OPENBLAS_CORETYPE names x86-64 kernels (Prescott's runs on any)",
)
def test_the_draws_do_not_depend_on_the_blas_kernel() -> None:
    """Every case's draws and state the same under the kernel OpenBLAS picks for this CPU
    and under its oldest x86-64 one (Prescott), each in its own interpreter (OpenBLAS
    reads OPENBLAS_CORETYPE once, at load): before, `tilt`'s differed (its scores' trend
    by `lstsq`, its kernel regression by a matrix-vector product)."""
    script = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
              "import test_density_replay as t; print(json.dumps(t.record()))")  # fmt: skip
    results = []
    for coretype in (None, "Prescott"):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        if coretype is not None:
            env["OPENBLAS_CORETYPE"] = coretype
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=100, check=True)  # fmt: skip
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for key in results[0]:
        assert results[0][key] == results[1][key], f"{key}: the draws depend on the BLAS kernel"


if __name__ == "__main__":  # the oracle, with the code of the commit it is named after
    GOLDEN.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
