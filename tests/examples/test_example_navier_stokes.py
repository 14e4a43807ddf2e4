"""The Navier–Stokes example: its solver against analytic solutions and invariants (the
oracles: a Fourier mode decaying as exp(-nu |k|^2 t), the forced laminar Kolmogorov flow,
energy and enstrophy conserved without viscosity), its models on any grid, and the
example end to end in subprocesses, tiny: launched solvers stream to the trainer under
`python` and under `accelerate launch` with two processes (gloo on CPU), and the model
beats the mean field and persistence on held-out simulations."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from helpers import processes_with, run_group

EXAMPLE_DIR = Path(__file__).parents[2] / "examples" / "navier_stokes"
EXAMPLE = EXAMPLE_DIR / "train.py"


def load(name: str) -> ModuleType:
    """``examples/navier_stokes/NAME.py`` under a name of its own (other examples have a
    ``solver`` module too)."""
    key = f"_navier_stokes_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, EXAMPLE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = 2 * np.pi * np.arange(n) / n
    return np.meshgrid(x, x)  # X varies along columns, Y along rows: the solver's layout


# -- the solver ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kx", "ky", "nu"), [(3, 2, 0.05), (1, 0, 0.01), (0, 5, 0.02)])
def test_a_single_fourier_mode_decays_as_exp_minus_nu_k2_t(kx: int, ky: int, nu: float) -> None:
    """Without forcing, omega = cos(k . x) is an exact solution (its advection term
    vanishes: the stream function is parallel to it) decaying as exp(-nu |k|^2 t)."""
    solver = load("solver")
    n, dt = 32, 0.01
    x, y = grid(n)
    omega0 = np.cos(kx * x + ky * y)
    fields = list(solver.step_fields(omega0, nu, np.zeros((n, n)), dt, [100, 100, 100]))
    for i, omega in enumerate(fields):
        exact = omega0 * np.exp(-nu * (kx**2 + ky**2) * dt * 100 * (i + 1))
        np.testing.assert_allclose(omega, exact, atol=1e-5)


def test_the_forced_kolmogorov_flow_from_rest_follows_its_analytic_solution() -> None:
    """From rest, f = A cos(k y): omega(t) = A / (nu k^2) (1 - exp(-nu k^2 t)) cos(k y)."""
    solver = load("solver")
    n, nu, amplitude, k, dt = 32, 0.03, 0.15, 3, 0.02
    _, y = grid(n)
    force = solver.forcing(n, amplitude, k + 0.7)  # the wavenumber is floored
    for i, omega in enumerate(solver.step_fields(np.zeros((n, n)), nu, force, dt, [50] * 4)):
        t = dt * 50 * (i + 1)
        exact = amplitude / (nu * k * k) * (1 - np.exp(-nu * k * k * t)) * np.cos(k * y)
        np.testing.assert_allclose(omega, exact, atol=1e-5)


def test_the_advection_term_of_two_modes_is_the_analytic_jacobian() -> None:
    """omega = cos x + cos 2y: psi = cos x + cos(2y) / 4 (laplacian psi = -omega),
    u = d(psi)/dy = -sin(2y) / 2, v = -d(psi)/dx = sin x, so without viscosity
    d(omega)/dt = -(u d(omega)/dx + v d(omega)/dy) = 1.5 sin x sin 2y at t = 0 (the sign
    of the velocity and of the advection checked, which the invariants below are not)."""
    solver = load("solver")
    n, dt = 32, 1e-4
    x, y = grid(n)
    omega0 = np.cos(x) + np.cos(2 * y)
    (omega,) = solver.step_fields(omega0, 0.0, np.zeros((n, n)), dt, [1])
    np.testing.assert_allclose((omega - omega0) / dt, 1.5 * np.sin(x) * np.sin(2 * y), atol=1e-3)


def test_without_viscosity_energy_and_enstrophy_are_conserved() -> None:
    """nu = 0, no forcing, a random field inside the dealiased band (|kx|, |ky| < n/3):
    the spectral advection conserves kinetic energy and enstrophy exactly, so what
    drifts is the time step's error, which falls 8x when dt halves (Heun, third order
    per unit time in the invariants); and the field changes (advection is not zero)."""
    solver = load("solver")
    n = 32
    k = np.fft.fftfreq(n, 1.0 / n)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    spectrum0 = np.fft.fft2(solver.initial_vorticity(n, seed=3))
    spectrum0[(np.abs(k[:, None]) >= n / 3) | (np.abs(k[None, :]) >= n / 3)] = 0
    omega0 = np.fft.ifft2(spectrum0).real

    def invariants(omega: np.ndarray) -> np.ndarray:
        power = np.abs(np.fft.fft2(omega)) ** 2
        return np.array([(power / np.where(k2 > 0, k2, 1.0)).sum(), power.sum()])

    drifts = []
    for dt, steps in ((0.01, 300), (0.005, 600)):
        (omega,) = solver.step_fields(omega0, 0.0, np.zeros((n, n)), dt, [steps])
        drifts.append(np.abs(invariants(omega) / invariants(omega0) - 1))
        assert np.abs(omega - omega0).max() > 1.0  # it moved: t = 3, velocities ~ 1
    assert (drifts[0] < 1e-4).all() and (drifts[1] < 1e-5).all(), drifts
    assert (drifts[1] < drifts[0] / 4).all(), drifts  # the time step's error, not the scheme's


def test_the_initial_field_is_a_unit_variance_zero_mean_field_fixed_by_its_seed() -> None:
    solver = load("solver")
    a, b = solver.initial_vorticity(64, 7), solver.initial_vorticity(64, 8)
    assert abs(a.mean()) < 1e-12 and a.std() == pytest.approx(1.0)
    np.testing.assert_array_equal(a, solver.initial_vorticity(64, 7))
    assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.5  # another seed, another field
    # the same large scales on a finer grid: the 64^2 field is the 128^2 one subsampled
    fine = solver.initial_vorticity(128, 7)
    np.testing.assert_allclose(fine[::2, ::2] / fine[::2, ::2].std(), a, atol=1e-6)


def test_the_solver_refuses_bad_parameters_and_configurations() -> None:
    solver = load("solver")
    with pytest.raises(ValueError, match=r"missing \['wavenumber'\], unknown \['k'\]"):
        solver.check_parameters({"nu": 0.1, "amplitude": 0.1, "k": 2})
    with pytest.raises(ValueError, match="nu=0.0 must be > 0"):
        solver.check_parameters({"nu": 0.0, "amplitude": 0.1, "wavenumber": 2})
    with pytest.raises(ValueError, match="grid_size=31 must be even and >= 8"):
        solver.FlowConfig(grid_size=31)
    with pytest.raises(ValueError, match=r"dt=2.0 must be > 0 and <= interval=1.0"):
        solver.FlowConfig(interval=1.0, dt=2.0)
