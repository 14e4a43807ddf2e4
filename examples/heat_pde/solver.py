"""The simulation of the heat-PDE example: a 2-D heat-equation solver that streams its field.

It solves du/dt = alpha * (d2u/dx2 + d2u/dy2) on the unit square, on an n x n grid of
interior points (spacing h = 1 / (n + 1)), with a uniform initial temperature and a
fixed temperature on each of the four sides (Dirichlet conditions), as in Melissa's
heat-PDE example. Time stepping is implicit (backward Euler, stable for any dt); each
step's linear system is solved exactly in the eigenbasis of the discrete Laplacian
(a discrete sine transform written as two matrix products), so numpy is all it needs.

Its five parameters are temperatures in kelvin: `t_initial` and the boundary
temperatures `t_left`, `t_right`, `t_bottom`, `t_top`. After each step it sends the
field ``temperature`` (float32, shape (n, n), row index = y from the bottom, column
index = x from the left) as time step 0, 1, ... (time step k holds the solution at
t = (k + 1) * dt).

Under the launcher it reads its simulation id, parameters and the trainer's rendezvous
directory from the environment (``MELISSA_TRAINER_SIMULATION_ID``,
``MELISSA_TRAINER_PARAMETERS``, ``MELISSA_TRAINER_RENDEZVOUS``). Started by hand (the
trainer's ``--external`` mode), the same can be given as flags:

    python examples/heat_pde/solver.py --simulation_id 0 \\
        --rendezvous outputs/heat_pde/rendezvous --parameters \\
        '{"t_initial": 300, "t_left": 100, "t_right": 500, "t_bottom": 200, "t_top": 400}'

This module imports numpy and `melissa_trainer.client` only (never torch): the
trainer imports `solve` from it to compute its validation simulations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: The parameters, in the order the trainer's samples carry them.
PARAMETER_NAMES = ("t_initial", "t_left", "t_right", "t_bottom", "t_top")
#: Range of every parameter, in kelvin. By the maximum principle the temperature stays
#: in this range everywhere, which is what the surrogate's normalisation relies on.
TEMPERATURE_RANGE = (100.0, 500.0)
PARAMETER_BOUNDS = dict.fromkeys(PARAMETER_NAMES, TEMPERATURE_RANGE)

ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"


@dataclass(frozen=True)
class HeatConfig:
    """The discretisation, shared by every simulation of a study.

    Attributes:
        grid_size: interior points per side (the field has grid_size**2 values).
        time_steps: implicit steps taken, one field sent per step.
        dt: time step (the domain is the unit square; the slowest mode decays over
            about 1 / (2 * pi**2 * alpha) = 0.05 time units at alpha = 1).
        alpha: thermal diffusivity.
    """

    grid_size: int = 32
    time_steps: int = 100
    dt: float = 1e-3
    alpha: float = 1.0

    def __post_init__(self) -> None:
        problems = []
        if self.grid_size < 2:
            problems.append(f"grid_size={self.grid_size} must be >= 2")
        if self.time_steps < 1:
            problems.append(f"time_steps={self.time_steps} must be >= 1")
        if not self.dt > 0:
            problems.append(f"dt={self.dt} must be > 0")
        if not self.alpha > 0:
            problems.append(f"alpha={self.alpha} must be > 0")
        if problems:
            raise ValueError("invalid heat-equation configuration: " + "; ".join(problems))

    def argv(self) -> list[str]:
        """These settings as flags of this script (what the launcher passes)."""
        return [
            "--grid_size",
            str(self.grid_size),
            "--time_steps",
            str(self.time_steps),
            "--dt",
            repr(self.dt),
            "--alpha",
            repr(self.alpha),
        ]


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """`parameters` as floats in `PARAMETER_NAMES` order; ValueError if any is missing/extra."""
    missing = [n for n in PARAMETER_NAMES if n not in parameters]
    extra = sorted(set(parameters) - set(PARAMETER_NAMES))
    if missing or extra:
        raise ValueError(
            f"the heat solver takes the parameters {list(PARAMETER_NAMES)}; "
            f"missing {missing}, unknown {extra}"
        )
    return {n: float(parameters[n]) for n in PARAMETER_NAMES}


def solve(parameters: Mapping[str, float], config: HeatConfig) -> Iterator[np.ndarray]:
    """Integrate one simulation; yield the temperature after each step.

    Each yielded array is a new float32 array of shape (grid_size, grid_size), in kelvin.
    Deterministic: the same parameters and configuration give the same fields.
    """
    p = check_parameters(parameters)
    n, r = config.grid_size, config.alpha * config.dt * (config.grid_size + 1) ** 2
    # Orthonormal, symmetric sine basis: S @ S = I, and S diagonalises the 1-D Laplacian
    # with Dirichlet conditions, whose eigenvalues are -4 sin^2(pi k / (2 (n + 1))).
    k = np.arange(1, n + 1)
    sine = np.sqrt(2.0 / (n + 1)) * np.sin(np.pi * np.outer(k, k) / (n + 1))
    s2 = np.sin(np.pi * k / (2 * (n + 1))) ** 2
    # Backward Euler: (I - r L) u_new = u + r b, diagonal in the sine basis.
    inverse = 1.0 / (1.0 + 4.0 * r * (s2[:, None] + s2[None, :]))
    # b: the boundary values that the 5-point stencil of the edge points reaches.
    b = np.zeros((n, n))
    b[:, 0] += p["t_left"]
    b[:, -1] += p["t_right"]
    b[0, :] += p["t_bottom"]
    b[-1, :] += p["t_top"]
    u = np.full((n, n), p["t_initial"])
    for _ in range(config.time_steps):
        spectral = sine @ (u + r * b) @ sine
        u = sine @ (spectral * inverse) @ sine
        yield u.astype(np.float32)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    defaults = HeatConfig()
    parser.add_argument("--grid_size", type=int, default=defaults.grid_size)
    parser.add_argument("--time_steps", type=int, default=defaults.time_steps)
    parser.add_argument("--dt", type=float, default=defaults.dt)
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument(
        "--simulation_id", type=int, default=None, help=f"default: ${ENV_SIMULATION_ID}"
    )
    parser.add_argument(
        "--parameters",
        default=None,
        help=f"JSON object of the {len(PARAMETER_NAMES)} parameters; default: ${ENV_PARAMETERS}",
    )
    parser.add_argument(
        "--rendezvous",
        default=None,
        help=f"the trainer's rendezvous dir; default: ${ENV_RENDEZVOUS}",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulation and stream it; returns the exit status."""
    from melissa_trainer.client import Client, fetch_endpoints

    opts = _parse(argv)
    try:
        config = HeatConfig(opts.grid_size, opts.time_steps, opts.dt, opts.alpha)
        text = opts.parameters if opts.parameters is not None else os.environ.get(ENV_PARAMETERS)
        if text is None:
            raise ValueError(f"no parameters: pass --parameters or set {ENV_PARAMETERS}")
        parameters = check_parameters(json.loads(text))
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"solver.py: {exc}", file=sys.stderr)
        return 2
    # Explicit endpoints only when given a directory; otherwise the client reads the
    # environment (MELISSA_TRAINER_ENDPOINTS or MELISSA_TRAINER_RENDEZVOUS).
    endpoints = fetch_endpoints(opts.rendezvous) if opts.rendezvous else None
    n = config.grid_size
    with Client(
        fields={"temperature": ((n, n), "float32")},
        parameters=parameters,  # in PARAMETER_NAMES order: the trainer relies on it
        simulation_id=opts.simulation_id,
        endpoints=endpoints,
        array_reuse="never",  # solve yields a new array every step: no wait for it
    ) as client:
        for step, temperature in enumerate(solve(parameters, config)):
            client.send(step, temperature=temperature)
    return 0


if __name__ == "__main__":
    sys.exit(main())
