"""A third-party-style solver for benchmarks/defaults.py: 1-D viscous Burgers in numpy.

Written as a user would write one, not as the library's examples are: explicit finite
differences (upwind advection, centred diffusion) on a periodic grid, the parameters
read from the client (the launcher puts them in its environment), one field sent per
output step. It solves

    u_t + u u_x = nu u_xx  on [0, 1), periodic,  u(x, 0) = amplitude * sin(2 pi x)

until t = `T_END`; the sine steepens into a front at x = 1/2 that viscosity smooths.
Field ``u``: float32, shape (`GRID`,), sent as time step 0, 1, ... (step k holds the
solution at t = (k + 1) * T_END / `STEPS`).

`solve` is what the benchmark imports to compute its validation simulations directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

GRID = 64
STEPS = 40  # output steps per simulation
T_END = 0.5
#: the parameters and their ranges, in the order the samples carry them
BOUNDS = {"amplitude": (0.5, 1.5), "viscosity": (0.02, 0.1)}


def solve(amplitude: float, viscosity: float, steps: int = STEPS) -> Iterator[np.ndarray]:
    """The first `steps` of the `STEPS` output fields of one simulation (float32, shape
    (GRID,)); the output step stays ``T_END / STEPS`` whatever `steps`."""
    dx = 1.0 / GRID
    x = np.arange(GRID) * dx
    u = amplitude * np.sin(2.0 * np.pi * x)
    out_dt = T_END / STEPS
    # stability of the explicit scheme: diffusion dt <= dx^2 / (2 nu), advection CFL
    limit = min(0.4 * dx * dx / viscosity, 0.5 * dx / max(amplitude, 1e-6))
    substeps = int(np.ceil(out_dt / limit))
    dt = out_dt / substeps
    for _ in range(steps):
        for _ in range(substeps):
            left, right = np.roll(u, 1), np.roll(u, -1)
            upwind = np.where(u > 0, u - left, right - u) / dx
            u = u + dt * (-u * upwind + viscosity * (right - 2.0 * u + left) / (dx * dx))
        yield u.astype(np.float32)


def main() -> None:
    import argparse

    from melissa_trainer.client import Client

    parser = argparse.ArgumentParser(description="1-D viscous Burgers, streamed")
    parser.add_argument("--steps", type=int, default=STEPS, help="output steps sent")
    steps = parser.parse_args().steps
    with Client(fields={"u": ((GRID,), "float32")}) as client:
        p = client.parameters  # from the launcher: {"amplitude": ..., "viscosity": ...}
        for t, u in enumerate(solve(p["amplitude"], p["viscosity"], steps)):
            client.send(t, u=u)


if __name__ == "__main__":
    main()
