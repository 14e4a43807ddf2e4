"""The heat example's held-out set (`held_out_parameters`: the same whatever the
run's seed, corners of the parameter box among them) and what a run with an adaptive
sampler prints on how to judge it (`judging_hint`)."""

from __future__ import annotations

import numpy as np

from heat_pde.solver import PARAMETER_BOUNDS, PARAMETER_NAMES
from melissa_trainer.launcher import make_sampler

#: the held-out set's own seed: the same held-out simulations whatever ``--seed``, so that
#: two runs (two samplers on one seed, or one sampler on several) are judged on one set
HELD_OUT_SEED = 20261201
#: adaptive samplers, whose run prints how to judge them against a fixed design
ADAPTIVE = ("breed", "density", "surrogate")


def held_out_parameters(count: int, seed: int = HELD_OUT_SEED) -> list[dict[str, float]]:
    """`count` held-out parameter sets spread over the whole box, the same for a given
    `seed`: a quarter of them (rounded up, at most the box's 32) distinct corners of the
    box, drawn at random (each temperature at one of its bounds: the largest spreads
    between temperatures, where this example's training loss is highest, docs/measured.md),
    the others the first points of a scrambled Halton sequence over the box."""
    names = list(PARAMETER_NAMES)
    rng = np.random.default_rng(seed)
    corners = min(-(-count // 4), 2 ** len(names))
    chosen: list[dict[str, float]] = []
    for index in rng.permutation(2 ** len(names))[:corners]:
        bits = [(int(index) >> k) & 1 for k in range(len(names))]
        chosen.append({n: PARAMETER_BOUNDS[n][b] for n, b in zip(names, bits, strict=True)})
    inside = make_sampler("halton", PARAMETER_BOUNDS, seed=seed)
    chosen += [inside.draw() for _ in range(count - corners)]
    return chosen


def judging_hint(sampler: str, seed: int, num_simulations: int) -> str:
    """How to judge an adaptive `sampler` (printed after its run): one run against
    nothing says nothing; the A/B against the plain design on the same seeds."""
    size = "" if num_simulations == 64 else f" --num_simulations {num_simulations}"
    return (
        f"judging --sampler {sampler}: this run alone cannot say whether it helped (a "
        "rerun differs with the machine's load, which changes which losses reach the "
        "sampler in time); run the plain design on the same seeds (with your other "
        "flags; the held-out set is the same) and compare the worst held-out "
        "simulation seed by seed, keeping the sampler only if it wins on most:\n"
        f"    python examples/heat_pde/train.py --sampler {sampler}{size} --seed {seed} "
        f"--seeds 3 --output_dir outputs/ab-{sampler}\n"
        f"    python examples/heat_pde/train.py --sampler lhs{size} --seed {seed} "
        "--seeds 3 --output_dir outputs/ab-lhs\n"
        "  (docs/concepts/study.md, \"The heat example's A/B\"; Breed's worst cases "
        'measured: docs/measured.md, "The examples\' Breed judged on the worst cases")'
    )
