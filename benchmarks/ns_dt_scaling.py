"""The Navier-Stokes example's solver: its default time step against the CFL-scaled one
at finer grids (docs/how-to/neural-operator.md, ``--grid_size``).

The GPU command scales ``--dt`` with the grid spacing (0.025 at 64^2, times 64 /
grid_size); the page says that this example's parameter ranges do not need it. This
measures what the default step changes: the same simulation (`solve` from
`examples/navier_stokes/solver.py`) run with ``dt 0.025`` and with the scaled step, at
the least viscous, most strongly forced corner of the ranges (nu 0.01, amplitude 0.2,
k = 4), compared field by field in relative L2 (||default - scaled|| / ||scaled||, the
scaled step's fields the reference):

* ``pooled_128`` and ``pooled_256``: 10 fields (t = 0.5 to 5), seed 7, pooled over
  the fields (`tests/examples/test_example_navier_stokes_solver.py` checks 128^2 below
  0.5%);
* ``mean_256_long`` and ``max_256_long``: 40 fields (t = 0.5 to 20), seed 3, the mean
  and the largest of the per-field errors;
* ``cfl_256`` and ``cfl_256_long``: the advective CFL number of the default step at
  256^2, max |u| dt / dx over the 10 fields of seed 7 and over the 40 of seed 3 (|u|
  the speed at a grid point).

No baseline: the rows' ``baseline`` is the scaled step's own error against itself (0)
and their ``ratio`` None. Deterministic (numpy's FFTs, one thread): a rerun gives the
same figures; about 20 s on one core.

    python benchmarks/ns_dt_scaling.py          # the table
    python benchmarks/ns_dt_scaling.py --json   # {"rows": [...]} last
    python benchmarks/ns_dt_scaling.py --quick  # 128^2 only (the pooled row)
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one thread, as the solvers

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from navier_stokes.flow_config import FlowConfig  # noqa: E402
from navier_stokes.solver import solve, wavenumbers  # noqa: E402
from report import add_flags, finish  # noqa: E402

#: the least viscous, most strongly forced corner of the example's ranges (k = 4)
CORNER = {"nu": 0.01, "amplitude": 0.2, "wavenumber": 4.99}
#: the example's default solver step, and the grid at which the GPU command keeps it
DT, BASE_GRID = 0.025, 64
INTERVAL = 0.5


def fields(n: int, count: int, dt: float, seed: int) -> np.ndarray:
    """`count` fields of the corner at `n`^2 from the initial field of `seed` (float64)."""
    config = FlowConfig(n, count, INTERVAL, dt)
    return np.stack(list(solve(CORNER, config, seed))).astype(np.float64)


def per_field(default: np.ndarray, scaled: np.ndarray) -> np.ndarray:
    """Each field's relative L2 error of `default` against `scaled`."""
    return np.sqrt(((default - scaled) ** 2).mean(axis=(1, 2)) / (scaled**2).mean(axis=(1, 2)))


def pooled(default: np.ndarray, scaled: np.ndarray) -> float:
    """The relative L2 error of `default` against `scaled` over every field at once."""
    return float(np.sqrt(((default - scaled) ** 2).mean() / (scaled**2).mean()))


def cfl(omega: np.ndarray, dt: float) -> float:
    """max |u| dt / dx over the fields `omega` (count, n, n): u from the stream function
    of each vorticity field, on the periodic square [0, 2 pi)^2."""
    n = omega.shape[-1]
    kx, ky = wavenumbers(n)
    k2 = kx**2 + ky**2
    w_hat = np.fft.rfft2(omega)
    psi_hat = w_hat * np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
    u = np.fft.irfft2(1j * ky * psi_hat, s=(n, n))
    v = np.fft.irfft2(-1j * kx * psi_hat, s=(n, n))
    return float(np.sqrt(u**2 + v**2).max() * dt / (2 * np.pi / n))


def row(case: str, value: float, unit: str, target: str) -> dict[str, Any]:
    return {"case": case, "ours": value, "baseline": 0.0, "unit": unit, "ratio": None,
            "target": target}  # fmt: skip


def measure(quick: bool) -> list[dict[str, Any]]:
    """The rows (`quick`: 128^2's pooled row alone)."""
    rows = []
    cfls = []
    for n in (128,) if quick else (128, 256):
        default, scaled = fields(n, 10, DT, 7), fields(n, 10, DT * BASE_GRID / n, 7)
        rows.append(row(f"pooled_{n}", 100 * pooled(default, scaled), "%", "< 0.5"))
        if n == 256:
            cfls.append(row("cfl_256", cfl(default, DT), "", "-"))
    if not quick:
        default, scaled = fields(256, 40, DT, 3), fields(256, 40, DT * BASE_GRID / 256, 3)
        # (a field that is not finite makes its error NaN, which no target meets)
        errors = 100 * per_field(default, scaled)
        rows += [
            row("mean_256_long", float(errors.mean()), "%", "< 0.5"),
            row("max_256_long", float(errors.max()), "%", "< 0.5"),
            *cfls,
            row("cfl_256_long", cfl(default, DT), "", "-"),
        ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flags(parser, quick="128^2 only: the pooled row")
    opts = parser.parse_args(argv)
    rows = measure(opts.quick)
    finish(
        rows,
        "default dt 0.025 against the CFL-scaled step (relative L2, %), the corner of the ranges",
        as_json=opts.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
