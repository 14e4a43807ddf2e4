"""The heat problem of the active-sampling benchmarks (issues 20, 31 and 46): the heat
example's solver (16 x 16 grid, 20 steps of 0.005) with the diffusivity as a parameter,
``log2_alpha`` in [-6, 1], and its spaces (`SPACES`): ``walls`` (the left and right
wall temperatures, 100-500 K, and ``log2_alpha``), ``full`` (all five temperatures
and ``log2_alpha``), ``wide`` (12 parameters: every wall in two halves, the initial
temperature in three bands, and ``log2_alpha``). Its **hard region** is fast diffusion,
``log2_alpha >= HARD_FROM``. A study's problem, model, budget and pacing (`Setup`), the
model's inputs and targets (`features`, `target`), held-out simulations solved here
(`test_set`), samples of the model's shapes from memory (`memory_samples`) and the
model (`make_model`). `active_sampling.py` runs the studies; it re-exports these names.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heat_pipelines as hp  # noqa: E402  (puts the heat example's solver on the path)
from solver import OPTIONAL_PARAMETERS, PARAMETER_NAMES, HeatConfig, solve  # noqa: E402

from melissa_trainer.launcher import make_sampler  # noqa: E402

NAMES = (*PARAMETER_NAMES, "log2_alpha")  # the solver's order, that of the samples' vector
#: the 12-parameter space's: the solver's segments after log2_alpha (its order)
WIDE_NAMES = (*PARAMETER_NAMES, *OPTIONAL_PARAMETERS)
LOG2_ALPHA = (-6.0, 1.0)
#: the hard region: fast diffusion, log2_alpha >= HARD_FROM
HARD_FROM = 0.0
WALLS = (100.0, 500.0)
SPACES: dict[str, dict[str, tuple[float, float]]] = {
    "walls": {"t_initial": (300.0, 300.0), "t_left": WALLS, "t_right": WALLS,
              "t_bottom": (300.0, 300.0), "t_top": (300.0, 300.0), "log2_alpha": LOG2_ALPHA},
    "full": {**dict.fromkeys(PARAMETER_NAMES, WALLS), "log2_alpha": LOG2_ALPHA},
    # 12: every wall in two halves, the initial temperature in three bands (issue 46)
    "wide": {**dict.fromkeys(WIDE_NAMES, WALLS), "log2_alpha": LOG2_ALPHA},
}  # fmt: skip
#: the surrogate acquisition's options (`SurrogateSampler`'s defaults when empty; chosen
#: before any run, not tuned: exploration 0.5, kappa 1, pool 1024, noise 0.1)
SURROGATE: dict[str, Any] = {}
#: the high-loss density arm's options: none named, `DensitySampler`'s defaults (share
#: 0.5, quantile 0.25, bandwidth 0.1, evidence 3, edge 0.7, candidates 1: issue 46's
#: second round; contrast "auto", 0.25 in the wide space: its fourth), chosen on tuning
#: seeds 0-4 with `active_sampling_fast.py` (docs/measured.md)
DENSITY: dict[str, Any] = {}
#: the Breed arm's options: the library's defaults (candidates and explorer unnamed: "auto"
#: explores the gap-filling Sobol' sequence with 16 candidates in the walls space, the
#: optimised Latin hypercube in its order in the full one)
BREED = {"exploration": 1.0, "sigma": 0.15, "floor": 0.5, "min_observations": 8}


@dataclass(frozen=True)
class Setup:
    """One study's problem, model, budget and pacing (the same for both samplers)."""

    space: str = "walls"
    grid_size: int = 16
    time_steps: int = 20
    dt: float = 0.005
    hidden: int = 128
    batch_size: int = 32
    learning_rate: float = 1e-3
    simulations: int = 48
    steps: int = 10_000
    stream_share: float = 0.7  # of the steps, over which the simulations stream
    # samples before the first step; >= batch_size: a reservoir's first read needs a batch
    # held, which the rate limiter (counting from the watermark) would otherwise never let in
    watermark: int = 100
    breed: dict[str, Any] = field(default_factory=lambda: dict(BREED))
    surrogate: dict[str, Any] = field(default_factory=lambda: dict(SURROGATE))
    density: dict[str, Any] = field(default_factory=lambda: dict(DENSITY))

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        return SPACES[self.space]

    @property
    def names(self) -> tuple[str, ...]:
        """The solver's parameters in its order (that of the samples' vector)."""
        return WIDE_NAMES if self.space == "wide" else NAMES

    @property
    def varying(self) -> list[int]:
        """Indices (in `names`) of the parameters that vary: the model's inputs."""
        return [i for i, n in enumerate(self.names) if self.bounds[n][1] > self.bounds[n][0]]

    @property
    def config(self) -> HeatConfig:
        return HeatConfig(self.grid_size, self.time_steps, self.dt)

    @property
    def ratio(self) -> float:
        """Samples drawn per sample inserted: the stream lasts `stream_share` of the steps."""
        inserted = self.simulations * self.time_steps - self.watermark
        return self.stream_share * self.steps * self.batch_size / max(inserted, 1)


def hard_bounds(setup: Setup) -> dict[str, tuple[float, float]]:
    return {**setup.bounds, "log2_alpha": (HARD_FROM, LOG2_ALPHA[1])}


def features(setup: Setup, parameters: np.ndarray, step: int) -> np.ndarray:
    """Model inputs: each varying parameter mapped onto [-1, 1], and sqrt(t / t_end)."""
    low = np.array([setup.bounds[n][0] for n in setup.names])
    high = np.array([setup.bounds[n][1] for n in setup.names])
    idx = setup.varying
    x = np.empty(len(idx) + 1, dtype=np.float32)
    x[:-1] = 2.0 * (parameters[idx] - low[idx]) / (high[idx] - low[idx]) - 1.0
    x[-1] = math.sqrt((step + 1) / setup.time_steps)
    return x


def target(field_: np.ndarray) -> np.ndarray:
    return (field_.reshape(-1) - np.float32(hp.CENTER)) / np.float32(hp.SCALE)


def test_set(
    setup: Setup, bounds: dict[str, tuple[float, float]], n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of `n` simulations drawn uniformly in `bounds`, solved here."""
    sampler = make_sampler("uniform", bounds, seed=seed)
    xs, ys = [], []
    for _ in range(n):
        p = sampler.draw()
        vector = np.array([p[name] for name in setup.names])
        for step, field_ in enumerate(solve(p, setup.config)):
            xs.append(features(setup, vector, step))
            ys.append(target(field_))
    return np.stack(xs), np.stack(ys)


def memory_samples(setup: Setup, seed: int, simulations: int = 48) -> list[dict[str, Any]]:
    """`simulations` x `setup.time_steps` random samples of this model's shapes (inputs
    ``x``, targets ``y`` as float32, ``simulation_id`` as a 0-d int64 array, as the
    receiver puts them), from `seed`: a trainer fed from memory, nothing else running
    (the issue-46 cost benchmarks `tracking_step`, `tracking_parts`,
    `reference_sensitivity`)."""
    rng = np.random.default_rng(seed)
    width, n = len(setup.varying) + 1, simulations * setup.time_steps
    return [{"x": rng.standard_normal(width).astype(np.float32),
             "y": rng.standard_normal(setup.grid_size**2).astype(np.float32),
             "simulation_id": np.array(i // setup.time_steps, np.int64)}
            for i in range(n)]  # fmt: skip


def make_model(setup: Setup, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)  # both samplers start from the same weights
    width, inputs = setup.hidden, len(setup.varying) + 1
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, width), torch.nn.SiLU(),
        torch.nn.Linear(width, width), torch.nn.SiLU(),
        torch.nn.Linear(width, width), torch.nn.SiLU(),
        torch.nn.Linear(width, setup.grid_size**2),
    )  # fmt: skip
