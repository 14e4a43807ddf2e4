"""The simulation of the Lorenz example: one Lorenz-63 trajectory, streamed step by step.

    dx/dt = sigma (y - x),   dy/dt = x (rho - z) - y,   dz/dt = x y - beta z

integrated with the classical 4th-order Runge-Kutta scheme at a fixed step `dt`. Its six
parameters are the coefficients `sigma`, `rho`, `beta` and the initial state `x0`, `y0`,
`z0` (the chaotic regime for every draw within `PARAMETER_BOUNDS`). At time step k it
sends the field ``transition``, float64 of shape (2, 3): the state at t = k dt and the
state at (k + 1) dt. Each sample is then one transition, what an autoregressive
surrogate learns, whatever order samples are drawn in.

Under the launcher it reads its simulation id, parameters and the trainer's rendezvous
directory from the environment (``MELISSA_TRAINER_SIMULATION_ID``,
``MELISSA_TRAINER_PARAMETERS``, ``MELISSA_TRAINER_RENDEZVOUS``); by hand, the same can be
given as flags (``--simulation_id``, ``--parameters JSON``, ``--rendezvous DIR``).

With ``--worker`` it is a worker of a launcher in worker mode (`Launcher(...,
worker=True)`, the trainer's ``--worker``): one process that runs simulation after
simulation, each asked of the launcher (`melissa_trainer.client.worker.serve_simulations`),
until none is left. Starting Python, numpy and the client takes a few tenths of a
second, of the order of a whole trajectory at the default 1,000 steps (more than a short
one): worker mode pays that start-up once per job rather than once per simulation.
Parameters the solver refuses are that simulation's failure (exit code 2, as its own
process would exit) and the worker goes on.

This module imports numpy and `melissa_trainer.client` only (never torch): the trainer
imports `trajectory` from it to compute its held-out trajectories.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from melissa_trainer.client.worker_launcher import refuse_worker_by_hand, worker_by_hand

#: The study that starts this solver's workers (what ``--worker`` run by hand is told).
WORKER_STUDY = "python examples/lorenz/train.py --worker"
if __name__ == "__main__":  # (first: ``--worker`` by hand refused before numpy is imported)
    refuse_worker_by_hand(WORKER_STUDY)

import numpy as np  # noqa: E402  (after the refusal above: a run by hand does not pay it)

#: The parameters, in the order the trainer's samples carry them.
PARAMETER_NAMES = ("sigma", "rho", "beta", "x0", "y0", "z0")
PARAMETER_BOUNDS = {
    "sigma": (9.0, 11.0),
    "rho": (26.0, 32.0),
    "beta": (2.4, 2.9),
    "x0": (-15.0, 15.0),
    "y0": (-15.0, 15.0),
    "z0": (10.0, 40.0),
}

ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """`parameters` as floats in `PARAMETER_NAMES` order; ValueError if any is missing/extra."""
    missing = [n for n in PARAMETER_NAMES if n not in parameters]
    extra = sorted(set(parameters) - set(PARAMETER_NAMES))
    if missing or extra:
        raise ValueError(
            f"the Lorenz solver takes the parameters {list(PARAMETER_NAMES)}; "
            f"missing {missing}, unknown {extra}"
        )
    return {n: float(parameters[n]) for n in PARAMETER_NAMES}


def integrate(parameters: Mapping[str, float], time_steps: int, dt: float) -> Iterator[np.ndarray]:
    """Yield the states at t = 0, dt, ..., time_steps * dt (float64 arrays of shape (3,)).

    Deterministic: the same arguments give the same states.
    """
    if time_steps < 1 or not dt > 0:
        raise ValueError(f"need time_steps >= 1 and dt > 0, got {time_steps} and {dt}")
    p = check_parameters(parameters)
    sigma, rho, beta = p["sigma"], p["rho"], p["beta"]

    def f(s: np.ndarray) -> np.ndarray:
        x, y, z = s
        return np.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    s = np.array([p["x0"], p["y0"], p["z0"]])
    yield s
    for _ in range(time_steps):
        k1 = f(s)
        k2 = f(s + 0.5 * dt * k1)
        k3 = f(s + 0.5 * dt * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        yield s


def trajectory(parameters: Mapping[str, float], time_steps: int, dt: float) -> np.ndarray:
    """The states of `integrate` as one float64 array of shape (time_steps + 1, 3)."""
    return np.stack(list(integrate(parameters, time_steps, dt)))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulation and stream it, or with ``--worker`` run the launcher's
    simulations one after another; returns the exit status."""
    from melissa_trainer.client import ENV_RENDEZVOUS

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--time_steps", type=int, default=1000, help="transitions sent")
    parser.add_argument("--dt", type=float, default=0.01, help="RK4 step")
    parser.add_argument("--simulation_id", type=int, default=None)
    parser.add_argument("--parameters", default=None, help=f"JSON; default: ${ENV_PARAMETERS}")
    parser.add_argument("--rendezvous", default=None, help="the trainer's rendezvous directory")
    parser.add_argument(
        "--worker",
        action="store_true",
        help="run simulations one after another as a launcher's worker (worker mode: the "
        "start-up paid once), each asked for with next_simulation()",
    )
    opts = parser.parse_args(argv)
    given = [f"--{n}" for n in ("simulation_id", "parameters") if getattr(opts, n) is not None]
    if opts.worker and given:  # (a worker's come from the launcher, one simulation at a time)
        parser.error(f"--worker takes its simulations from the launcher: not with {given}")
    parameters = None
    try:
        # time_steps and dt checked before connecting (a worker's first simulation too)
        next(integrate(dict.fromkeys(PARAMETER_NAMES, 0.0), opts.time_steps, opts.dt))
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
    # --rendezvous sets MELISSA_TRAINER_RENDEZVOUS, which the client reads itself (not
    # endpoints passed to it): the directory is how it follows a restarted trainer and
    # asks at close whether the trainer took it (a refused one then exits non-zero).
    if opts.rendezvous:
        os.environ.pop("MELISSA_TRAINER_ENDPOINTS", None)
        os.environ[ENV_RENDEZVOUS] = opts.rendezvous
    if parameters is not None:
        stream(parameters, opts.time_steps, opts.dt, opts.simulation_id)
        return 0
    from melissa_trainer.client.worker import serve_simulations  # worker mode
    from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE
    from melissa_trainer.client.worker_launcher import LauncherGone

    try:
        serve_simulations(
            lambda sid, p, context: stream(p, opts.time_steps, opts.dt, sid, context),
            check=check_parameters,
        )
    except LauncherGone as exc:  # (orphaned: its message is the one line to say)
        print(f"solver.py: {exc}", file=sys.stderr)
        return NOT_DELIVERED_EXIT_CODE
    return 0


def stream(
    parameters: Mapping[str, float],
    time_steps: int,
    dt: float,
    simulation_id: int | None,
    context: Any = None,
) -> None:
    """Stream one trajectory (`integrate`) to the trainer, one transition per step:
    `parameters` as `check_parameters` returns them, `simulation_id` None:
    ``$MELISSA_TRAINER_SIMULATION_ID``; `context`: a ZeroMQ context to share (a
    worker's, one for all its simulations), None: the client's own."""
    from melissa_trainer.client import Client

    states = integrate(parameters, time_steps, dt)
    state = next(states)
    with Client(
        fields={"transition": ((2, 3), "float64")},
        parameters=parameters,  # in PARAMETER_NAMES order: the trainer relies on it
        simulation_id=simulation_id,
        context=context,
    ) as client:
        transition = np.empty((2, 3))
        for k, next_state in enumerate(states):
            transition[0], transition[1] = state, next_state
            client.send(k, transition=transition)  # copied or sent when it returns
            state = next_state


if __name__ == "__main__":
    sys.exit(main())
