"""What both rows of benchmarks/field_surrogate.py train: the Navier–Stokes example's FNO
(`model`: its default width, modes and layers), its mapping of samples to batches
(`example_mapping`, its train.py's) and samples shaped like its stream (`make_samples`).

It puts examples/ on ``sys.path``: the example's modules are imported as the package
`navier_stokes` (never a bare `solver`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

# examples/: the example's modules as the package `navier_stokes` (never a bare `solver`)
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "examples"))
from navier_stokes.models import make_model  # noqa: E402
from navier_stokes.solver import PARAMETER_BOUNDS, PARAMETER_NAMES, initial_vorticity  # noqa: E402
from navier_stokes.train import make_process_sample  # noqa: E402

TIME_STEPS = 10
#: the example's default model: width, modes, layers
WIDTH, MODES, LAYERS = 16, 12, 4
CHANNELS = 4


def example_mapping() -> Any:
    """The example's `make_process_sample` (its train.py's), for TIME_STEPS time steps."""
    return make_process_sample(TIME_STEPS)


def make_samples(n_samples: int, grid: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Samples shaped like the example's stream: omega(0) the solver's initial field of
    a seed, omega(t) another (the values do not change a step's cost)."""
    rng = np.random.default_rng(seed)
    fields = [initial_vorticity(grid, s).astype(np.float32) for s in range(32)]
    samples = []
    for i in range(n_samples):
        vector = np.array([rng.uniform(*PARAMETER_BOUNDS[p]) for p in PARAMETER_NAMES])
        samples.append(
            {
                "vorticity": fields[(i + 1) % len(fields)],
                "initial": fields[i % len(fields)],
                "time_step": np.array(i % TIME_STEPS, np.int64),
                "parameters": vector,
            }
        )
    return samples


def model(seed: int, modes: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return make_model("fno", CHANNELS, WIDTH, modes, LAYERS)
