"""The simulation of the heat_guess example: an implicit heat solver whose linear
solves are iterative, and which asks the trainer's surrogate for their initial guess
(issue 47: the surrogate served back to the running simulations while it trains).

It solves du/dt = alpha * (d2u/dx2 + d2u/dy2) on the unit square (an n x n grid of
interior points, spacing h = 1 / (n + 1)), uniform initial temperature `t_initial`, a
fixed temperature on each side (`t_left`, `t_right`, `t_bottom`, `t_top`, kelvin), by
backward Euler: each step solves ``A u_next = f`` with ``A = I - r L`` (L the 5-point
Laplacian with the boundary values moved into ``b``, ``r = alpha dt / h**2``) and
``f = u + r b``. The solve is iterative, to a relative residual ``||f - A x|| <= tol
||f||``:

* ``jacobi`` (the default): ``x += (f - A x) / (1 + 4 r)``. Cheap sweeps that remove
  the rough part of an error in a few iterations and its smooth part slowly.
* ``cg``: conjugate gradient (A is symmetric positive definite).

The initial guess: the previous state ``u`` (the solver's own), or, when the trainer
answers, ``u + increment`` where ``increment`` is the surrogate's prediction of
``u_next - u`` from the step's initial residual ``f - A u`` (the request's input,
``residual``). The guess is kept only if its residual is the smaller (one more
application of A: a surrogate that is still bad costs one product, never a slower
solve); with ``--guess_check none`` every guess that comes is taken (its residual is
still computed, as the solve starts from it), however bad: what the check saves,
measured by `benchmarks/serve_guess.py`. A prediction that does not come
(`PredictionUnavailable`: training has not started, the request was refused, the
trainer is restarting or gone) leaves the previous state as the guess: the simulation
never depends on the trainer.

Each step it sends ``residual`` (float32, (n, n): ``f - A u``) and ``increment``
(float32, (n, n): ``u_next - u``): what the surrogate learns from, and records its
work: the products by A it computed (`Operator.products`: every residual, the guess's
check included), the iterations of each solve, whether it used a prediction and the
model version of it. With ``--record DIR`` it writes them to ``DIR/sim{id}.json`` at
the end.

This module imports numpy and `melissa_trainer.client` only (never torch): the
trainer imports `steps` from it to compute its validation pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: The parameters, kelvin, in the order the simulations' parameters carry them.
PARAMETER_NAMES = ("t_initial", "t_left", "t_right", "t_bottom", "t_top")
PARAMETER_BOUNDS = dict.fromkeys(PARAMETER_NAMES, (100.0, 500.0))
METHODS = ("jacobi", "cg")
#: what decides whether a guess that came is taken: ``residual``, only if its residual
#: is the smaller; ``none``, always
GUESS_CHECKS = ("residual", "none")
#: the most iterations of one solve (a guard: the defaults converge in < 100)
MAX_ITERATIONS = 10_000

ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"


@dataclass(frozen=True)
class GuessConfig:
    """The discretisation and the solver, shared by every simulation of a study.

    Attributes:
        grid_size: interior points per side.
        time_steps: implicit steps, one sample sent per step.
        dt: the time step (alpha = 1).
        tol: relative residual each solve reaches.
        method: ``jacobi`` or ``cg``.
        guess_check: ``residual`` (a guess is taken only if its residual is the
            smaller) or ``none`` (every guess that comes is taken).
    """

    grid_size: int = 32
    time_steps: int = 50
    dt: float = 1e-3
    tol: float = 1e-6
    method: str = "jacobi"
    guess_check: str = "residual"

    def __post_init__(self) -> None:
        problems = []
        if self.grid_size < 2:
            problems.append(f"grid_size={self.grid_size} must be >= 2")
        if self.time_steps < 1:
            problems.append(f"time_steps={self.time_steps} must be >= 1")
        if not self.dt > 0:
            problems.append(f"dt={self.dt} must be > 0")
        if not 0 < self.tol < 1:
            problems.append(f"tol={self.tol} must be in (0, 1)")
        if self.method not in METHODS:
            problems.append(f"method={self.method!r} must be one of {list(METHODS)}")
        if self.guess_check not in GUESS_CHECKS:
            problems.append(f"guess_check={self.guess_check!r} must be one of {list(GUESS_CHECKS)}")
        if problems:
            raise ValueError("invalid heat_guess configuration: " + "; ".join(problems))

    @property
    def r(self) -> float:
        return self.dt * (self.grid_size + 1) ** 2

    def argv(self) -> list[str]:
        """These settings as flags of this script."""
        return [
            *("--grid_size", str(self.grid_size), "--time_steps", str(self.time_steps)),
            *("--dt", repr(self.dt), "--tol", repr(self.tol), "--method", self.method),
            *("--guess_check", self.guess_check),
        ]


class Operator:
    """``A = I - r L`` on an (n, n) grid, counting its applications (`products`)."""

    def __init__(self, r: float) -> None:
        self.r = r
        self.products = 0

    def __call__(self, u: np.ndarray) -> np.ndarray:
        self.products += 1
        lap = -4.0 * u
        lap[1:, :] += u[:-1, :]
        lap[:-1, :] += u[1:, :]
        lap[:, 1:] += u[:, :-1]
        lap[:, :-1] += u[:, 1:]
        return u - self.r * lap


def boundary(parameters: Mapping[str, float], n: int) -> np.ndarray:
    """``b``: the boundary temperatures the stencil of the edge points reaches."""
    b = np.zeros((n, n))
    b[:, 0] += parameters["t_left"]
    b[:, -1] += parameters["t_right"]
    b[0, :] += parameters["t_bottom"]
    b[-1, :] += parameters["t_top"]
    return b


def solve(
    a: Operator, f: np.ndarray, x: np.ndarray, residual: np.ndarray, tol: float, method: str
) -> tuple[np.ndarray, int]:
    """``A x = f`` from `x` (whose residual ``f - A x`` is `residual`), to ``||f - A x||
    <= tol ||f||``, by `method`: the solution and the iterations it took (one product
    by A each). Raises RuntimeError past `MAX_ITERATIONS`."""
    target = tol * float(np.linalg.norm(f))
    x, res = x.copy(), residual.copy()
    if method == "jacobi":
        diagonal = 1.0 + 4.0 * a.r
        for done in range(MAX_ITERATIONS):
            if np.linalg.norm(res) <= target:
                return x, done
            x += res / diagonal
            res = f - a(x)
    else:
        p, rr = res.copy(), float((res * res).sum())
        for done in range(MAX_ITERATIONS):
            if np.sqrt(rr) <= target:
                return x, done
            ap = a(p)
            alpha = rr / float((p * ap).sum())
            x += alpha * p
            res -= alpha * ap
            rr, old = float((res * res).sum()), rr
            p = res + (rr / old) * p
    raise RuntimeError(f"the {method} solve did not converge in {MAX_ITERATIONS} iterations")


#: ``ask(residual) -> (increment, version)``, or None when no prediction comes
Ask = Callable[[np.ndarray], "tuple[np.ndarray, int] | None"]


@dataclass
class Work:
    """One simulation's record: per step, the products by A, the iterations of the
    solve (its products less the initial residual and the guess's), whether the
    surrogate's guess was used, and the model version of the prediction (-1: none came)."""

    products: list[int] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)
    used: list[bool] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)


def steps(
    parameters: Mapping[str, float], config: GuessConfig, ask: Ask | None = None,
    work: Work | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Integrate one simulation; yield ``(residual, increment)`` per step (float64).

    `ask` gives the surrogate's increment for a residual (module docstring); None: the
    previous state is always the guess; a guess is taken as `config.guess_check` says.
    `work` (if given) receives the record.
    """
    p = check_parameters(parameters)
    n = config.grid_size
    a = Operator(config.r)
    b = config.r * boundary(p, n)
    u = np.full((n, n), p["t_initial"])
    for _ in range(config.time_steps):
        before = a.products
        f = u + b
        residual = f - a(u)
        x, res, used, version = u, residual, False, -1
        answer = ask(residual) if ask is not None else None
        if answer is not None:
            increment, version = answer
            guess = u + increment
            guess_res = f - a(guess)
            taken = config.guess_check == "none"
            if taken or np.linalg.norm(guess_res) < np.linalg.norm(residual):
                x, res, used = guess, guess_res, True
        u_next, iterations = solve(a, f, x, res, config.tol, config.method)
        if work is not None:
            work.products.append(a.products - before)
            work.iterations.append(iterations)
            work.used.append(used)
            work.versions.append(version)
        yield residual, u_next - u
        u = u_next


def check_parameters(parameters: Mapping[str, float]) -> dict[str, float]:
    """`parameters` as floats; ValueError if one is missing or unknown."""
    missing = [n for n in PARAMETER_NAMES if n not in parameters]
    extra = sorted(set(parameters) - set(PARAMETER_NAMES))
    if missing or extra:
        raise ValueError(
            f"the heat_guess solver takes the parameters {list(PARAMETER_NAMES)}; "
            f"missing {missing}, unknown {extra}"
        )
    return {n: float(parameters[n]) for n in PARAMETER_NAMES}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    d = GuessConfig()
    parser.add_argument("--grid_size", type=int, default=d.grid_size)
    parser.add_argument("--time_steps", type=int, default=d.time_steps)
    parser.add_argument("--dt", type=float, default=d.dt)
    parser.add_argument("--tol", type=float, default=d.tol, help="relative residual per solve")
    parser.add_argument("--method", choices=METHODS, default=d.method)
    parser.add_argument(
        "--guess_check", choices=GUESS_CHECKS, default=d.guess_check,
        help="residual: take a guess only if its residual is the smaller; none: every one",
    )  # fmt: skip
    parser.add_argument(
        "--no_surrogate", action="store_true", help="never ask: the previous state is the guess"
    )
    parser.add_argument(
        "--predict_timeout", type=float, default=1.0, help="seconds a prediction may take"
    )
    parser.add_argument("--record", default=None, metavar="DIR", help="write DIR/sim{id}.json")
    parser.add_argument("--simulation_id", type=int, default=None)
    parser.add_argument("--parameters", default=None, help=f"JSON; default ${ENV_PARAMETERS}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulation (streaming, asking for its guesses); the exit status."""
    opts = _parse(argv)
    try:
        config = GuessConfig(
            opts.grid_size, opts.time_steps, opts.dt, opts.tol, opts.method, opts.guess_check
        )
        text = opts.parameters if opts.parameters is not None else os.environ.get(ENV_PARAMETERS)
        if text is None:
            raise ValueError(f"no parameters: pass --parameters or set {ENV_PARAMETERS}")
        parameters = check_parameters(json.loads(text))
        if not opts.predict_timeout > 0:
            raise ValueError(f"--predict_timeout must be > 0, not {opts.predict_timeout}")
    except (ValueError, TypeError) as exc:
        print(f"solver.py: {exc}", file=sys.stderr)
        return 2
    from melissa_trainer.client import Client, PredictionUnavailable

    n, work = config.grid_size, Work()
    spec = ((n, n), "float32")
    with Client(
        fields={"residual": spec, "increment": spec},
        parameters=parameters,
        simulation_id=opts.simulation_id,
        array_reuse="never",  # new arrays every step
    ) as client:

        def ask(residual: np.ndarray) -> tuple[np.ndarray, int] | None:
            try:
                outputs, version = client.predict(
                    {"residual": residual.astype(np.float32)}, timeout=opts.predict_timeout
                )
            except PredictionUnavailable:  # not serving yet, busy, restarting, gone
                return None
            return outputs["increment"].astype(np.float64), version

        source = steps(parameters, config, None if opts.no_surrogate else ask, work)
        for t, (residual, increment) in enumerate(source):
            client.send(
                t, residual=residual.astype(np.float32), increment=increment.astype(np.float32)
            )
        sid = client.simulation_id
    if opts.record is not None:
        path = os.path.join(opts.record, f"sim{sid}.json")
        with open(f"{path}.partial", "w") as f:
            json.dump({"simulation_id": sid, "parameters": parameters, **work.__dict__}, f)
        os.replace(f"{path}.partial", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
