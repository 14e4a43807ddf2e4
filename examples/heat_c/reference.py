"""The scheme of `heat.c` and `heat.f90` in numpy: the trainer's validation simulations,
and the tests' bit-for-bit reference.

du/dt = alpha (u_xx + u_yy) on nx x ny interior points, Dirichlet sides, explicit
5-point steps ``u += r * ((((u_W + u_E) + u_S) + u_N) - 4 u)`` in float64, in that
order: numpy evaluates each operation on whole arrays in IEEE double, with no
reassociation and no fused multiply-add, which is what the compiled solvers do
(built with ``-ffp-contract=off``), so their fields equal these bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

#: The solvers' parameters (kelvin), in the order the trainer's samples carry them.
PARAMETER_NAMES = ("t_initial", "t_left", "t_right", "t_bottom", "t_top")
#: Range of every parameter; by the maximum principle (r <= 1/4) the field stays in it.
TEMPERATURE_RANGE = (100.0, 500.0)
PARAMETER_BOUNDS = dict.fromkeys(PARAMETER_NAMES, TEMPERATURE_RANGE)
#: R = alpha dt / h^2 when the solvers are not given one (stable up to 1/4).
DEFAULT_R = 0.2


def solve(
    parameters: Mapping[str, float], nx: int, ny: int, steps: int, r: float = DEFAULT_R
) -> Iterator[np.ndarray]:
    """Yield the field after each step: a new float32 array of shape (ny, nx), row = y
    from the bottom, column = x from the left (what the solvers send as time step k
    after k + 1 steps). KeyError if a parameter is missing."""
    u = np.full((ny + 2, nx + 2), float(parameters["t_initial"]))
    u[:, 0] = parameters["t_left"]
    u[:, -1] = parameters["t_right"]
    u[0, 1:-1] = parameters["t_bottom"]
    u[-1, 1:-1] = parameters["t_top"]
    for _ in range(steps):
        centre = u[1:-1, 1:-1]
        lap = (((u[1:-1, :-2] + u[1:-1, 2:]) + u[:-2, 1:-1]) + u[2:, 1:-1]) - 4.0 * centre
        u[1:-1, 1:-1] = centre + r * lap  # (the right side is computed before the write)
        yield u[1:-1, 1:-1].astype(np.float32)
