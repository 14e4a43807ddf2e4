"""The simulation of the Navier–Stokes example: 2-D incompressible flow in vorticity form,
pseudo-spectral, streaming its vorticity field.

It solves, on the periodic square [0, 2 pi)^2 discretised by an n x n grid,

    d(omega)/dt + u . grad(omega) = nu * laplacian(omega) + f,
    u = (d(psi)/dy, -d(psi)/dx),   laplacian(psi) = -omega,

with a Kolmogorov forcing on the vorticity, f(x, y) = amplitude * cos(k y), k = floor of
the parameter `wavenumber` (an integer, so that f is periodic). Space is spectral (numpy
FFT), the nonlinear term computed on the grid and dealiased by the 2/3 rule; time is
Crank–Nicolson for the viscous term and Heun (explicit RK2) for the advection and the
forcing, the scheme of Li et al.'s FNO data set, with a fixed step `dt`. The mean
vorticity is zero and stays zero (a periodic domain has no net circulation).

Its parameters: `nu` (viscosity), `amplitude` and `wavenumber` (the forcing); the initial
vorticity is a Gaussian random field of the simulation's seed (by default its id), power
spectrum ~ (|k|^2 + 9)^-2.5, unit standard deviation: a smooth, turbulent-looking field.

After every `interval` time units it sends ``vorticity`` (the field at t = (k + 1) *
interval for time step k) and ``initial`` (at t = 0), float32 (n, n), rows y, columns x:
a sample is self-contained, as the buffer may have evicted a simulation's first message.

Under the launcher it reads its simulation id, parameters and the trainer's rendezvous
directory from the environment (``MELISSA_TRAINER_SIMULATION_ID``, ``..._PARAMETERS``,
``..._RENDEZVOUS``); started by hand, from flags:

    python examples/navier_stokes/solver.py --simulation_id 0 \\
        --rendezvous outputs/navier_stokes/rendezvous \\
        --parameters '{"nu": 0.02, "amplitude": 0.5, "wavenumber": 3}'

With ``--save_npy PATH`` it streams nothing and writes the run to PATH instead (the
simulate-then-train pipeline's storage, `benchmarks/online_vs_offline_ns.py`): a float32
array (time_steps + 1, n, n), the initial field first, and ``{"parameters": {...}, "seed":
s}`` to PATH.json (each written aside and renamed, the .npy last: a file at PATH is whole).

With ``--worker`` it is a launcher's worker (worker mode, the trainer's ``--worker``): one
process, one start-up, that runs simulation after simulation, asking the launcher for each
(`melissa_trainer.client.worker.serve_simulations`); each streams what its own process
would, bit for bit; one the solver refuses fails with exit code 2, one that blows up
(`Unstable`: too large a --dt) with 3, as its own process would; the worker goes on.

This module imports numpy, `melissa_trainer.client` and its discretisation (`FlowConfig`,
`flow_config`) only (never torch): the trainer imports `solve` from it to compute its
validation simulations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.client.worker_launcher import refuse_worker_by_hand, worker_by_hand

# examples/ on the path (run as a script, its folder is): this folder is the package
# `navier_stokes`, as train.py imports it (never a bare module name: `__init__`)
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from navier_stokes.flow_config import FlowConfig  # noqa: E402

#: The study that starts this solver's workers (what ``--worker`` run by hand is told).
WORKER_STUDY = "python examples/navier_stokes/train.py --worker"
if __name__ == "__main__":  # (first: ``--worker`` by hand refused before numpy is imported)
    refuse_worker_by_hand(WORKER_STUDY)

import numpy as np  # noqa: E402  (after the refusal above: a run by hand does not pay it)

if TYPE_CHECKING:
    import zmq

#: The parameters, in the order the trainer's samples carry them.
PARAMETER_NAMES = ("nu", "amplitude", "wavenumber")
#: The ranges a study draws them from (`wavenumber` is floored: k in {2, 3, 4}).
PARAMETER_BOUNDS = {"nu": (0.01, 0.05), "amplitude": (0.05, 0.2), "wavenumber": (2.0, 5.0)}

ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"


#: `Unstable` past MARGIN times |omega(0)| + t |f|, the vorticity's L2 bound (advection
#: keeps the norm, viscosity lowers it): a blow-up (too large a --dt) passes it in a few
#: steps, before its fields of 1e24 (which overflowed the trainer's loss) or NaN. (Not a
#: CFL limit: 512^2 is stable at CFL 2.0, 64^2 at --dt 0.1 blows up from 1.25.)
MARGIN = 2.0
#: the exit status of a simulation stopped by `Unstable` (2 is a refused configuration)
UNSTABLE_EXIT_CODE = 3


class Unstable(ArithmeticError):
    """The solution blew up: its norm passed `MARGIN` times its bound, or is no longer
    finite. Raised before the field is yielded, so no such field is sent."""


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """`parameters` as floats in `PARAMETER_NAMES` order; ValueError if one is missing,
    unknown, or out of what the solver can run (nu > 0, wavenumber >= 1)."""
    missing = [n for n in PARAMETER_NAMES if n not in parameters]
    extra = sorted(set(parameters) - set(PARAMETER_NAMES))
    if missing or extra:
        raise ValueError(
            f"the Navier-Stokes solver takes the parameters {list(PARAMETER_NAMES)}; "
            f"missing {missing}, unknown {extra}"
        )
    p = {n: float(parameters[n]) for n in PARAMETER_NAMES}
    if not p["nu"] > 0:
        raise ValueError(f"nu={p['nu']} must be > 0")
    if not p["wavenumber"] >= 1:
        raise ValueError(f"wavenumber={p['wavenumber']} must be >= 1")
    return p


def wavenumbers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(kx, ky) on the rfft2 grid of an n x n field on [0, 2 pi)^2: shapes (1, n//2+1)
    and (n, 1), integers."""
    return np.fft.rfftfreq(n, 1.0 / n)[None, :], np.fft.fftfreq(n, 1.0 / n)[:, None]


def initial_vorticity(n: int, seed: int) -> np.ndarray:
    """A Gaussian random field of zero mean and unit standard deviation, power spectrum
    ~ (|k|^2 + 9)^-2.5, drawn from `seed` (float64, shape (n, n)). The same seed gives the
    same large scales on any grid (the modes are drawn on a fixed 32 x 32 set of low
    wavenumbers, the rest being negligible)."""
    rng = np.random.default_rng(seed)
    m = 32  # modes drawn: |kx|, |ky| < 16, whatever n
    low = rng.standard_normal((m, m)) + 1j * rng.standard_normal((m, m))
    kx, ky = np.meshgrid(np.fft.fftfreq(m, 1.0 / m), np.fft.fftfreq(m, 1.0 / m))
    low *= (kx**2 + ky**2 + 9.0) ** -1.25  # amplitude: sqrt of the power spectrum
    low[0, 0] = 0.0
    half = min(m, n) // 2  # the modes both grids hold: the first and last `half` indices
    to = np.r_[0:half, n - half : n]
    full = np.zeros((n, n), complex)
    full[np.ix_(to, to)] = low[np.ix_(np.r_[0:half, m - half : m], np.r_[0:half, m - half : m])]
    omega = np.fft.ifft2(full).real  # the real part: a real field with that spectrum
    return omega / omega.std()


def forcing(n: int, amplitude: float, wavenumber: float) -> np.ndarray:
    """The forcing on the vorticity, amplitude * cos(floor(wavenumber) * y), shape (n, n)."""
    y = 2 * np.pi * np.arange(n) / n
    return np.repeat((amplitude * np.cos(np.floor(wavenumber) * y))[:, None], n, axis=1)


def step_fields(
    omega0: np.ndarray, nu: float, force: np.ndarray, dt: float, steps: Sequence[int]
) -> Iterator[np.ndarray]:
    """Integrate from `omega0` (n x n, float64) with viscosity `nu` and forcing `force`
    (n x n), yielding the field (a new float64 array) after each count of solver steps in
    `steps` (cumulative: [40, 40] yields after 40 and after 80 steps).

    Raises:
        Unstable: after the first solver step whose field's L2 norm exceeds `MARGIN`
            times |omega(0)| + t |f| (or is not finite); no field yielded exceeds it."""
    n = omega0.shape[0]
    kx, ky = wavenumbers(n)
    k2 = kx**2 + ky**2
    inverse_laplacian = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
    dealias = (np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)  # the 2/3 rule
    viscous = 0.5 * dt * nu * k2  # Crank–Nicolson: (1 - a) / (1 + a) on each mode
    lhs = 1.0 / (1.0 + viscous)
    f_hat = np.fft.rfft2(force)

    weights = np.where((kx == 0) | (kx == n // 2), 1.0, 2.0)  # rfft2 holds half the modes

    def l2(hat: np.ndarray) -> float:
        """The field's L2 norm over the grid points (Parseval), from its rfft2."""
        return float(np.sqrt((weights * np.abs(hat) ** 2).sum())) / n

    def check(w_hat: np.ndarray, taken: int) -> None:
        """`Unstable` if the state after `taken` steps breaks `MARGIN` times its bound."""
        norm, bound = l2(w_hat), norm0 + taken * dt * l2(f_hat)
        if not norm <= MARGIN * bound:  # (NaN included)
            raise Unstable(
                f"unstable at t={taken * dt:g} (solver step {taken}): the vorticity's L2 "
                f"norm is {norm:.3g}, above {MARGIN:g} times the {bound:.3g} that the "
                f"equations allow; with a solver step of {dt:g} the solution blows up (to "
                f"NaN): lower --dt below {dt:g}"
            )

    def tendency(w_hat: np.ndarray) -> np.ndarray:
        """-u . grad(omega) + f in Fourier space (dealiased)."""
        psi_hat = w_hat * inverse_laplacian
        u = np.fft.irfft2(1j * ky * psi_hat, s=(n, n))
        v = np.fft.irfft2(-1j * kx * psi_hat, s=(n, n))
        wx = np.fft.irfft2(1j * kx * w_hat, s=(n, n))
        wy = np.fft.irfft2(1j * ky * w_hat, s=(n, n))
        return f_hat - dealias * np.fft.rfft2(u * wx + v * wy)

    w_hat = np.fft.rfft2(omega0)
    w_hat[0, 0] = 0.0
    norm0, taken = l2(w_hat), 0
    for count in steps:
        for _ in range(count):
            explicit = tendency(w_hat)
            predictor = ((1.0 - viscous) * w_hat + dt * explicit) * lhs
            w_hat = ((1.0 - viscous) * w_hat + 0.5 * dt * (explicit + tendency(predictor))) * lhs
            taken += 1
            check(w_hat, taken)  # every step: a blow-up is caught a step in, not a field
        yield np.fft.irfft2(w_hat, s=(n, n))


def solve(parameters: Mapping[str, float], config: FlowConfig, seed: int) -> Iterator[np.ndarray]:
    """Integrate one simulation from the initial field of `seed`; yield the vorticity
    after each interval, a new float32 array of shape (grid_size, grid_size).
    Deterministic: the same parameters, configuration and seed give the same fields."""
    p = check_parameters(parameters)
    n = config.grid_size
    omega0 = initial_vorticity(n, seed)
    force = forcing(n, p["amplitude"], p["wavenumber"])
    steps = [config.substeps] * config.time_steps
    for omega in step_fields(omega0, p["nu"], force, config.step, steps):
        yield omega.astype(np.float32)


def save_npy(path: str, fields: np.ndarray, record: Mapping[str, object]) -> None:
    """Write `fields` to `path` (.npy) and `record` to ``{path}.json``; each aside then
    renamed, the .npy last: a file at `path` is complete and has its record."""
    for target, write in (
        (f"{path}.json", lambda f: f.write(json.dumps(record).encode())),
        (path, lambda f: np.save(f, fields)),
    ):
        partial = f"{target}.partial"
        with open(partial, "wb") as f:
            write(f)
        os.replace(partial, target)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    defaults = FlowConfig()
    for name, kind in (("grid_size", int), ("time_steps", int), ("interval", float), ("dt", float)):
        parser.add_argument(f"--{name}", type=kind, default=getattr(defaults, name))
    add = parser.add_argument
    add("--simulation_id", type=int, default=None, help=f"default: ${ENV_SIMULATION_ID}")
    add("--seed", type=int, default=None,
        help="the initial field's seed; default: the simulation id")  # fmt: skip
    add("--parameters", default=None,
        help=f"JSON object of the {len(PARAMETER_NAMES)} parameters; default: "
        f"${ENV_PARAMETERS}")  # fmt: skip
    add("--rendezvous", default=None,
        help=f"the trainer's rendezvous dir; default: ${ENV_RENDEZVOUS}")  # fmt: skip
    add("--save_npy", default=None, metavar="PATH",
        help="write the run to PATH (.npy; {simulation_id} is replaced) instead of "
        "streaming")  # fmt: skip
    add("--worker", action="store_true",
        help="run simulations one after another as a launcher's worker (worker mode: the "
        "start-up paid once; each simulation's seed its id), each asked for with "
        "next_simulation()")  # fmt: skip
    opts = parser.parse_args(argv)
    names = ("simulation_id", "seed", "parameters", "save_npy")
    given = [f"--{n}" for n in names if getattr(opts, n) is not None]
    if opts.worker and given:  # (a worker's come from the launcher, one simulation at a time)
        parser.error(f"--worker takes its simulations from the launcher: not with {given}")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulation and stream it (or save it), or with ``--worker`` run the
    launcher's simulations one after another; returns the exit status."""
    opts = _parse(argv)
    try:  # the configuration checked before connecting (a worker's first simulation too)
        config = FlowConfig(opts.grid_size, opts.time_steps, opts.interval, opts.dt)
        parameters, simulation_id, seed = None, opts.simulation_id, opts.seed
        if opts.worker and (refused := worker_by_hand(WORKER_STUDY)) is not None:
            raise ValueError(refused)  # (run by hand, no launcher to ask: one line)
        if not opts.worker:
            text = opts.parameters
            if text is None:
                text = os.environ.get(ENV_PARAMETERS)
            if text is None:
                raise ValueError(f"no parameters: pass --parameters or set {ENV_PARAMETERS}")
            parameters = check_parameters(json.loads(text))
            if simulation_id is None and ENV_SIMULATION_ID in os.environ:
                simulation_id = int(os.environ[ENV_SIMULATION_ID])
            seed = seed if seed is not None else simulation_id
            if seed is None:
                raise ValueError(
                    f"no seed: pass --seed, --simulation_id or set {ENV_SIMULATION_ID}"
                )
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"solver.py: {exc}", file=sys.stderr)
        return 2
    if opts.save_npy is not None and parameters is not None and seed is not None:
        try:  # the initial field first, then each one sent
            initial = initial_vorticity(config.grid_size, seed)
            fields = np.stack([initial, *solve(parameters, config, seed)]).astype(np.float32)
        except Unstable as exc:  # nothing written: a file at PATH is a whole run
            print(f"solver.py: simulation {simulation_id}: {exc}", file=sys.stderr)
            return UNSTABLE_EXIT_CODE
        path = opts.save_npy.format(simulation_id=simulation_id)
        save_npy(path, fields, {"parameters": parameters, "seed": seed})
        return 0
    # --rendezvous sets MELISSA_TRAINER_RENDEZVOUS, which the client reads itself: how it
    # follows a restarted trainer and asks at close whether the trainer took it.
    if opts.rendezvous:
        os.environ.pop("MELISSA_TRAINER_ENDPOINTS", None)
        os.environ[ENV_RENDEZVOUS] = opts.rendezvous
    if parameters is not None and seed is not None:
        return stream(parameters, config, simulation_id, seed)
    from melissa_trainer.client.worker import serve_simulations  # worker mode
    from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE
    from melissa_trainer.client.worker_launcher import LauncherGone

    try:
        serve_simulations(
            lambda sid, p, context: stream(p, config, sid, sid, context), check=check_parameters
        )
    except LauncherGone as exc:  # (orphaned: its message is the one line to say)
        print(f"solver.py: {exc}", file=sys.stderr)
        return NOT_DELIVERED_EXIT_CODE
    return 0


def stream(
    parameters: Mapping[str, float],
    config: FlowConfig,
    simulation_id: int | None,
    seed: int,
    context: zmq.Context | None = None,
) -> int:
    """Stream one simulation (`solve` from the initial field of `seed`) to the trainer:
    `parameters` as `check_parameters` returns them, `simulation_id` None:
    ``$MELISSA_TRAINER_SIMULATION_ID``; `context`: a ZeroMQ context to share (a
    worker's), None: the client's own. Returns the exit status: 0, or
    `UNSTABLE_EXIT_CODE` if the solution blew up (`Unstable`, said on stderr): the fields
    before were sent, none of the blow-up, and the client closed without its BYE."""
    from melissa_trainer.client import Client

    n = config.grid_size
    initial = initial_vorticity(n, seed).astype(np.float32)
    try:
        with Client(
            fields={"vorticity": ((n, n), "float32"), "initial": ((n, n), "float32")},
            parameters=parameters,  # in PARAMETER_NAMES order: the trainer relies on it
            simulation_id=simulation_id,
            array_reuse="never",  # solve yields a new array every step; `initial` never changes
            context=context,
        ) as client:
            for step, vorticity in enumerate(solve(parameters, config, seed)):
                client.send(step, vorticity=vorticity, initial=initial)
    except Unstable as exc:  # (the with block closed the client without its BYE)
        print(f"solver.py: simulation {client.simulation_id}: {exc}", file=sys.stderr)
        return UNSTABLE_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main())
