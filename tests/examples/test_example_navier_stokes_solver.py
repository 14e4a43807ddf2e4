"""The Navier–Stokes example's solver against analytic solutions and invariants (the
oracles: a Fourier mode decaying as exp(-nu |k|^2 t), the forced laminar Kolmogorov flow,
the advection term of two modes, energy and enstrophy conserved without viscosity), its
seeded initial field, its default time step at 128^2, its refusals, and ``--save_npy``.
Its models: test_example_navier_stokes_models.py; the example end to end:
test_example_navier_stokes.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# examples/ is on the tests' sys.path (pyproject): the example's modules by package name
from navier_stokes import flow_config, solver


def grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = 2 * np.pi * np.arange(n) / n
    return np.meshgrid(x, x)  # X varies along columns, Y along rows: the solver's layout


@pytest.mark.parametrize(("kx", "ky", "nu"), [(3, 2, 0.05), (1, 0, 0.01), (0, 5, 0.02)])
def test_a_single_fourier_mode_decays_as_exp_minus_nu_k2_t(kx: int, ky: int, nu: float) -> None:
    """Without forcing, omega = cos(k . x) is an exact solution (its advection term
    vanishes: the stream function is parallel to it) decaying as exp(-nu |k|^2 t)."""
    n, dt = 32, 0.01
    x, y = grid(n)
    omega0 = np.cos(kx * x + ky * y)
    fields = list(solver.step_fields(omega0, nu, np.zeros((n, n)), dt, [100, 100, 100]))
    for i, omega in enumerate(fields):
        exact = omega0 * np.exp(-nu * (kx**2 + ky**2) * dt * 100 * (i + 1))
        np.testing.assert_allclose(omega, exact, atol=1e-5)


def test_the_forced_kolmogorov_flow_from_rest_follows_its_analytic_solution() -> None:
    """From rest, f = A cos(k y): omega(t) = A / (nu k^2) (1 - exp(-nu k^2 t)) cos(k y)."""
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
    a, b = solver.initial_vorticity(64, 7), solver.initial_vorticity(64, 8)
    assert abs(a.mean()) < 1e-12 and a.std() == pytest.approx(1.0)
    np.testing.assert_array_equal(a, solver.initial_vorticity(64, 7))
    assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.5  # another seed, another field
    # the same large scales on a finer grid: the 64^2 field is the 128^2 one subsampled
    fine = solver.initial_vorticity(128, 7)
    np.testing.assert_allclose(fine[::2, ::2] / fine[::2, ::2].std(), a, atol=1e-6)


def test_the_default_dt_needs_no_scaling_at_128() -> None:
    """The how-to's claim (docs/how-to/neural-operator.md, --grid_size): at 128^2 the
    default dt 0.025 gives, for the least viscous and most strongly forced parameters
    of the study's ranges, the fields of dt 0.0125 (the CFL-scaled step) to 0.5% in
    relative L2 over the 10 fields: finite, and far below the surrogate's error."""
    parameters = {
        "nu": solver.PARAMETER_BOUNDS["nu"][0],
        "amplitude": solver.PARAMETER_BOUNDS["amplitude"][1],
        "wavenumber": 4.99,
    }  # wavenumber: k = 4, the highest
    fields = {
        dt: np.stack(list(solver.solve(parameters, flow_config.FlowConfig(128, 10, 0.5, dt), 7)))
        for dt in (0.025, 0.0125)
    }
    coarse, fine = fields[0.025], fields[0.0125]
    assert np.isfinite(coarse).all()
    relative = np.sqrt(((coarse - fine) ** 2).mean() / (fine**2).mean())
    assert relative < 5e-3, relative


def test_the_solver_refuses_bad_parameters_and_configurations() -> None:
    with pytest.raises(ValueError, match=r"missing \['wavenumber'\], unknown \['k'\]"):
        solver.check_parameters({"nu": 0.1, "amplitude": 0.1, "k": 2})
    with pytest.raises(ValueError, match="nu=0.0 must be > 0"):
        solver.check_parameters({"nu": 0.0, "amplitude": 0.1, "wavenumber": 2})
    with pytest.raises(ValueError, match="grid_size=31 must be even and >= 8"):
        flow_config.FlowConfig(grid_size=31)
    with pytest.raises(ValueError, match=r"dt=2.0 must be <= interval=1.0"):
        flow_config.FlowConfig(interval=1.0, dt=2.0)


@pytest.mark.e2e
def test_save_npy_writes_the_run_instead_of_streaming_it(tmp_path: Path) -> None:
    """``--save_npy`` (the offline pipeline's storage): the initial field, then the field
    after each interval as `solve` yields it, and the parameters and seed beside them;
    each file written aside and renamed (no partial file left)."""
    parameters = {"nu": 0.03, "amplitude": 0.15, "wavenumber": 2.0}
    argv = [sys.executable, str(Path(solver.__file__)), "--grid_size", "16",
            "--time_steps", "3", "--dt", "0.1", "--simulation_id", "5",
            "--parameters", json.dumps(parameters),
            "--save_npy", str(tmp_path / "sim-{simulation_id:06d}.npy")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = flow_config.FlowConfig(grid_size=16, time_steps=3, dt=0.1)
    expected = [solver.initial_vorticity(16, 5), *solver.solve(parameters, config, seed=5)]
    fields = np.load(tmp_path / "sim-000005.npy")
    assert fields.dtype == np.float32 and fields.shape == (4, 16, 16)
    np.testing.assert_array_equal(fields, np.stack(expected).astype(np.float32))
    record = json.loads((tmp_path / "sim-000005.npy.json").read_text())
    assert record == {"parameters": parameters, "seed": 5}
    assert sorted(f.name for f in tmp_path.iterdir()) == ["sim-000005.npy", "sim-000005.npy.json"]


def test_the_dt_help_says_what_the_how_to_measured() -> None:
    """`--dt`'s help told users to scale it with 64 / grid_size while the how-to said
    (and the test above checks) that the default stays stable at finer grids (a user
    trial, 2026-12-02): the help now says the how-to's finding."""
    from navier_stokes import train

    words = " ".join(train.parser([]).format_help().split())
    assert "scale it with" not in words
    assert "the default stays stable and accurate up to 256^2" in words, words


#: a corner of the study's ranges (the least viscous, the strongest forcing, k = 4)
CORNER = {"nu": 0.01, "amplitude": 0.2, "wavenumber": 4.9}


def test_a_solution_that_blows_up_stops_before_sending_a_field_of_it() -> None:
    """A user trial (2026-12-04): ``--dt 0.1`` (accepted: dt <= interval) at 64^2 made
    this corner's solution grow to 1e24 and then NaN with exit status 0; the receiver
    refused the NaN fields but took the finite 1e24 ones, whose square overflowed the
    trainer's float32 loss (NonFiniteLossError at step 1, blaming NaN samples). Now
    `step_fields` raises `Unstable` at the first step whose field's norm passes `MARGIN`
    times the bound of the equations: the field yielded before (t = 0.5) is the stable
    one, none of the blow-up is yielded."""
    fields, raised = [], None
    try:
        for field in solver.solve(CORNER, flow_config.FlowConfig(64, 10, 0.5, 0.1), 3):
            fields.append(field)
    except Exception as exc:  # noqa: BLE001 - the test names what it must be below
        raised = exc
    assert all(np.isfinite(f).all() and np.abs(f).max() < 20 for f in fields), [
        float(np.abs(f).max()) for f in fields
    ]
    assert len(fields) == 1  # the blow-up starts past t = 0.5
    assert isinstance(raised, solver.Unstable), raised
    assert "unstable at t=1 (solver step 10)" in str(raised) and "lower --dt" in str(raised)


def test_the_default_dt_runs_the_corner_within_the_bound_at_128() -> None:
    """The check stops no run of the example's own: the corner at 128^2 with the
    default dt runs its 10 fields."""
    fields = list(solver.solve(CORNER, flow_config.FlowConfig(128, 10, 0.5, 0.025), 3))
    assert len(fields) == 10 and all(np.isfinite(f).all() for f in fields)


@pytest.mark.e2e
def test_the_solver_process_exits_3_on_a_blow_up_and_saves_nothing(tmp_path: Path) -> None:
    """Run as the launcher runs it (here ``--save_npy``): one line naming the fix on
    stderr, exit status `UNSTABLE_EXIT_CODE` (the launcher's account then names the
    simulation and its exit codes), and no file (a file at PATH is a whole run). Before,
    it exited 0 having written fields of 1e24 and NaN."""
    argv = [sys.executable, str(Path(solver.__file__)), "--dt", "0.1", "--seed", "3",
            "--simulation_id", "0", "--parameters", json.dumps(CORNER),
            "--save_npy", str(tmp_path / "sim.npy")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert solver.UNSTABLE_EXIT_CODE == 3
    assert proc.stderr.startswith("solver.py: simulation 0: unstable at t=1"), proc.stderr
    assert "lower --dt" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("dt", "substeps"), [(0.025, 20), (0.00625, 80), (0.1, 5), (0.24, 3), (0.3, 2), (0.4, 2)]
)
def test_the_solver_step_is_never_larger_than_dt(dt: float, substeps: int) -> None:
    """Each interval is taken in the fewest equal steps of at most --dt: dt itself where
    it divides the interval. Rounded to the nearest count, ``--dt 0.4`` ran one step
    of 0.5, and ``--dt 0.24`` (a user lowering --dt below the 0.25 that ``--dt 0.3``
    blew up with, as the error said) ran the same steps of 0.25 and blew up the same."""
    config = flow_config.FlowConfig(interval=0.5, dt=dt)
    assert config.substeps == substeps
    assert config.step <= dt * (1 + 1e-12)
    assert config.step == pytest.approx(0.5 / substeps)
