"""The simulation of the heat-PDE example: a 2-D heat-equation solver that streams its field.

It solves du/dt = alpha * (d2u/dx2 + d2u/dy2) on the unit square, on an n x n grid of
interior points (spacing h = 1 / (n + 1)), with a uniform initial temperature and a
fixed temperature on each of the four sides (Dirichlet conditions), as in Melissa's
heat-PDE example. Time stepping is implicit (backward Euler, stable for any dt); each
step's linear system is solved exactly in the eigenbasis of the discrete Laplacian
(a discrete sine transform written as two matrix products), so numpy is all it needs.

Its five parameters are temperatures in kelvin: `t_initial` and the boundary
temperatures `t_left`, `t_right`, `t_bottom`, `t_top`. A sixth, optional one,
`log2_alpha`, sets the diffusivity of that simulation (alpha = 2 ** log2_alpha,
overriding `--alpha`): the field is linear in the temperatures but not in alpha, so a
study varying it needs more simulations to generalise (`benchmarks/online_vs_offline.py`
varies it over [-2, 2], alpha from 1/4 to 4). Six more optional ones split the
conditions into segments (`SEGMENT_PARAMETERS`): ``t_left_2`` / ``t_right_2`` the upper
half of the left / right wall, ``t_bottom_2`` / ``t_top_2`` the right half of the bottom
/ top wall (the named wall temperature then holds on the other half), ``t_initial_2`` /
``t_initial_3`` the initial temperature of the middle / right third of the square
(`t_initial` the left third): all eleven with `log2_alpha` make the 12-parameter space
of `benchmarks/active_sampling.py`. After each step it sends the
field ``temperature`` (float32, shape (n, n), row index = y from the bottom, column
index = x from the left) as time step 0, 1, ... (time step k holds the solution at
t = (k + 1) * dt).

Under the launcher it reads its simulation id, parameters and the trainer's rendezvous
directory from the environment (``MELISSA_TRAINER_SIMULATION_ID``,
``MELISSA_TRAINER_PARAMETERS``, ``MELISSA_TRAINER_RENDEZVOUS``). Started by hand (the
trainer's ``--external`` mode), the same can be given as flags. With ``--save_npy
PATH`` it streams nothing and writes the whole run to PATH instead, one float32 array of
shape (time_steps, n, n), and its parameters to PATH.json (each written aside and
renamed, the .npy last: a file at PATH is complete), which is how the classic
simulate-then-train pipeline stores it:

    python examples/heat_pde/solver.py --simulation_id 0 \\
        --rendezvous outputs/heat_pde/rendezvous --parameters \\
        '{"t_initial": 300, "t_left": 100, "t_right": 500, "t_bottom": 200, "t_top": 400}'

With ``--worker`` it is a worker of a launcher in worker mode (`Launcher(...,
worker=True)`, the trainer's ``--worker``): one process that pays its start-up (the
interpreter, numpy, the client) once and then runs one simulation after another, asking
the launcher for each (`melissa_trainer.client.worker.serve_simulations`), until none is
left. Each simulation streams the same fields as a process of its own with the same
parameters would (`solve` is deterministic); one whose parameters the solver refuses is
reported failed (exit code 2, as its own process would exit) and the worker goes on.

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
from typing import TYPE_CHECKING

from melissa_trainer.client.worker_launcher import refuse_worker_by_hand, worker_by_hand

#: The study that starts this solver's workers (what ``--worker`` run by hand is told).
WORKER_STUDY = "python examples/heat_pde/train.py --worker"
if __name__ == "__main__":  # (first: ``--worker`` by hand refused before numpy is imported)
    refuse_worker_by_hand(WORKER_STUDY)

import numpy as np  # noqa: E402  (after the refusal above: a run by hand does not pay it)

if TYPE_CHECKING:  # (imported where used: saving needs neither)
    import zmq

#: The parameters, in the order the trainer's samples carry them.
PARAMETER_NAMES = ("t_initial", "t_left", "t_right", "t_bottom", "t_top")
#: Range of every parameter, in kelvin. By the maximum principle the temperature stays
#: in this range everywhere, which is what the surrogate's normalisation relies on.
TEMPERATURE_RANGE = (100.0, 500.0)
PARAMETER_BOUNDS = dict.fromkeys(PARAMETER_NAMES, TEMPERATURE_RANGE)
#: Optional parameters, after `PARAMETER_NAMES` in the order given here when present.
#: the segments' temperatures (module docstring): each splits a condition in two or three
SEGMENT_PARAMETERS = ("t_left_2", "t_right_2", "t_bottom_2", "t_top_2", "t_initial_2",
                      "t_initial_3")  # fmt: skip
OPTIONAL_PARAMETERS = ("log2_alpha", *SEGMENT_PARAMETERS)
#: Range of `log2_alpha`: alpha from 1/4 to 4 (the solver accepts any value).
LOG2_ALPHA_RANGE = (-2.0, 2.0)

ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"


def config_problems(
    grid_size: int, time_steps: int, dt: float, alpha: float = 1.0, substeps: int = 1
) -> list[str]:
    """What `HeatConfig` refuses in these values (each on its own: none relates two), one
    line each, each starting with the field's ``name=value`` (the example's parser names
    the flag from it)."""
    problems = []
    if grid_size < 2:
        problems.append(f"grid_size={grid_size} must be >= 2")
    if time_steps < 1:
        problems.append(f"time_steps={time_steps} must be >= 1")
    if not dt > 0:
        problems.append(f"dt={dt} must be > 0")
    if not alpha > 0:
        problems.append(f"alpha={alpha} must be > 0")
    if substeps < 1:
        problems.append(f"substeps={substeps} must be >= 1")
    return problems


@dataclass(frozen=True)
class HeatConfig:
    """The discretisation, shared by every simulation of a study.

    Attributes:
        grid_size: interior points per side (the field has grid_size**2 values).
        time_steps: implicit steps taken, one field sent per step.
        dt: time step (the domain is the unit square; the slowest mode decays over
            about 1 / (2 * pi**2 * alpha) = 0.05 time units at alpha = 1).
        alpha: thermal diffusivity.
        substeps: implicit steps of ``dt / substeps`` taken per time step sent (1: one
            step of `dt`). More is more accurate and costs `substeps` times the work per
            sample, as a finer solver would: `benchmarks/online_vs_offline.py --sweep`
            uses it to vary what a sample costs to simulate, the field barely changing.
    """

    grid_size: int = 32
    time_steps: int = 100
    dt: float = 1e-3
    alpha: float = 1.0
    substeps: int = 1

    def __post_init__(self) -> None:
        problems = config_problems(
            self.grid_size, self.time_steps, self.dt, self.alpha, self.substeps
        )
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
            "--substeps",
            str(self.substeps),
        ]


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """`parameters` as floats in `PARAMETER_NAMES` order, then the `OPTIONAL_PARAMETERS`
    given; ValueError if any is missing or unknown."""
    missing = [n for n in PARAMETER_NAMES if n not in parameters]
    extra = sorted(set(parameters) - set(PARAMETER_NAMES) - set(OPTIONAL_PARAMETERS))
    if missing or extra:
        raise ValueError(
            f"the heat solver takes the parameters {list(PARAMETER_NAMES)} (and optionally "
            f"{list(OPTIONAL_PARAMETERS)}); missing {missing}, unknown {extra}"
        )
    names = PARAMETER_NAMES + tuple(n for n in OPTIONAL_PARAMETERS if n in parameters)
    return {n: float(parameters[n]) for n in names}


def solve(parameters: Mapping[str, float], config: HeatConfig) -> Iterator[np.ndarray]:
    """Integrate one simulation; yield the temperature after each step.

    Each yielded array is a new float32 array of shape (grid_size, grid_size), in kelvin.
    Deterministic: the same parameters and configuration give the same fields.
    """
    p = check_parameters(parameters)
    alpha = 2.0 ** p["log2_alpha"] if "log2_alpha" in p else config.alpha
    dt = config.dt / config.substeps
    n, r = config.grid_size, alpha * dt * (config.grid_size + 1) ** 2
    # Orthonormal, symmetric sine basis: S @ S = I, and S diagonalises the 1-D Laplacian
    # with Dirichlet conditions, whose eigenvalues are -4 sin^2(pi k / (2 (n + 1))).
    k = np.arange(1, n + 1)
    sine = np.sqrt(2.0 / (n + 1)) * np.sin(np.pi * np.outer(k, k) / (n + 1))
    s2 = np.sin(np.pi * k / (2 * (n + 1))) ** 2
    # Backward Euler: (I - r L) u_new = u + r b, diagonal in the sine basis.
    inverse = 1.0 / (1.0 + 4.0 * r * (s2[:, None] + s2[None, :]))
    # b: the boundary values that the 5-point stencil of the edge points reaches.
    # (rows: y from the bottom; a segment's second half from the middle point on)
    half, b = n // 2, np.zeros((n, n))
    b[:half, 0] += p["t_left"]
    b[half:, 0] += p.get("t_left_2", p["t_left"])
    b[:half, -1] += p["t_right"]
    b[half:, -1] += p.get("t_right_2", p["t_right"])
    b[0, :half] += p["t_bottom"]
    b[0, half:] += p.get("t_bottom_2", p["t_bottom"])
    b[-1, :half] += p["t_top"]
    b[-1, half:] += p.get("t_top_2", p["t_top"])
    u = np.full((n, n), p["t_initial"])
    third = n // 3
    u[:, third : n - third] = p.get("t_initial_2", p["t_initial"])
    u[:, n - third :] = p.get("t_initial_3", p["t_initial"])
    for _ in range(config.time_steps):
        for _ in range(config.substeps):
            spectral = sine @ (u + r * b) @ sine
            u = sine @ (spectral * inverse) @ sine
        yield u.astype(np.float32)


def save_npy(
    path: str | os.PathLike[str], fields: np.ndarray, parameters: Mapping[str, float]
) -> None:
    """Write `fields` to `path` (.npy) and `parameters` to ``{path}.json``; each aside
    then renamed, the .npy last: a file at `path` is complete and has its parameters."""
    path = os.fspath(path)
    for target, write in (
        (f"{path}.json", lambda f: f.write(json.dumps(parameters).encode())),
        (path, lambda f: np.save(f, fields)),
    ):
        partial = f"{target}.partial"
        with open(partial, "wb") as f:
            write(f)
        os.replace(partial, target)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    defaults = HeatConfig()
    parser.add_argument("--grid_size", type=int, default=defaults.grid_size)
    parser.add_argument("--time_steps", type=int, default=defaults.time_steps)
    parser.add_argument("--dt", type=float, default=defaults.dt)
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument(
        "--substeps",
        type=int,
        default=defaults.substeps,
        help="implicit steps of dt/substeps per time step sent (cost per sample x substeps)",
    )
    parser.add_argument(
        "--simulation_id", type=int, default=None, help=f"default: ${ENV_SIMULATION_ID}"
    )
    parser.add_argument(
        "--parameters",
        default=None,
        help=f"JSON object of the {len(PARAMETER_NAMES)} parameters; default: ${ENV_PARAMETERS}",
    )
    parser.add_argument(
        "--save_npy",
        default=None,
        metavar="PATH",
        help="write the run to PATH (.npy, shape (time_steps, n, n)) instead of streaming it",
    )
    parser.add_argument(
        "--rendezvous",
        default=None,
        help=f"the trainer's rendezvous dir; default: ${ENV_RENDEZVOUS}",
    )
    parser.add_argument(
        "--worker",
        action="store_true",
        help="run simulations one after another as a launcher's worker (worker mode: the "
        "start-up paid once), each asked for with next_simulation()",
    )
    opts = parser.parse_args(argv)
    names = ("simulation_id", "parameters", "save_npy")
    given = [f"--{n}" for n in names if getattr(opts, n) is not None]
    if opts.worker and given:  # (a worker's come from the launcher, one simulation at a time)
        parser.error(f"--worker takes its simulations from the launcher: not with {given}")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulation and stream it (or save it), or with ``--worker`` run the
    launcher's simulations one after another; returns the exit status."""
    opts = _parse(argv)
    try:
        config = HeatConfig(opts.grid_size, opts.time_steps, opts.dt, opts.alpha, opts.substeps)
        parameters = None
        if opts.worker and (refused := worker_by_hand(WORKER_STUDY)) is not None:
            raise ValueError(refused)  # (run by hand, no launcher to ask: one line)
        if not opts.worker:
            text = opts.parameters
            if text is None:
                text = os.environ.get(ENV_PARAMETERS)
            if text is None:
                raise ValueError(f"no parameters: pass --parameters or set {ENV_PARAMETERS}")
            parameters = check_parameters(json.loads(text))
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"solver.py: {exc}", file=sys.stderr)
        return 2
    if opts.save_npy is not None and parameters is not None:
        save_npy(opts.save_npy, np.stack(list(solve(parameters, config))), parameters)
        return 0
    # The client reads the environment (MELISSA_TRAINER_ENDPOINTS, or the rendezvous
    # directory MELISSA_TRAINER_RENDEZVOUS); --rendezvous sets the latter. Read by the
    # client itself, not passed as endpoints, the directory tells it when the trainer
    # was restarted (new endpoints there), which its error then says (`client.restart`).
    if opts.rendezvous:
        os.environ.pop("MELISSA_TRAINER_ENDPOINTS", None)
        os.environ[ENV_RENDEZVOUS] = opts.rendezvous
    if parameters is not None:
        stream(parameters, config, opts.simulation_id)
        return 0
    from melissa_trainer.client.worker import serve_simulations  # worker mode
    from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE
    from melissa_trainer.client.worker_launcher import LauncherGone

    try:
        serve_simulations(
            lambda sid, p, context: stream(p, config, sid, context), check=check_parameters
        )
    except LauncherGone as exc:  # (orphaned: its message is the one line to say)
        print(f"solver.py: {exc}", file=sys.stderr)
        return NOT_DELIVERED_EXIT_CODE
    return 0


def stream(
    parameters: Mapping[str, float],
    config: HeatConfig,
    simulation_id: int | None,
    context: zmq.Context | None = None,
) -> None:
    """Stream one simulation (`solve`) to the trainer: `parameters` as `check_parameters`
    returns them, `simulation_id` None: ``$MELISSA_TRAINER_SIMULATION_ID``; `context`: a
    ZeroMQ context to share (a worker's, one for all its simulations), None: the
    client's own."""
    from melissa_trainer.client import Client  # not needed to save

    n = config.grid_size
    with Client(
        fields={"temperature": ((n, n), "float32")},
        parameters=parameters,  # in PARAMETER_NAMES order: the trainer relies on it
        simulation_id=simulation_id,
        array_reuse="never",  # solve yields a new array every step: no wait for it
        context=context,
    ) as client:
        for step, temperature in enumerate(solve(parameters, config)):
            client.send(step, temperature=temperature)


if __name__ == "__main__":
    sys.exit(main())
