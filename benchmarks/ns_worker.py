"""The Navier-Stokes example's solver: its start-up against its simulation, and its
study in worker mode against one process per simulation.

`examples/navier_stokes/solver.py` is a Python solver (numpy FFTs) whose start-up is
the interpreter and its imports (numpy, pyzmq, the client), paid by every process, and
whose simulation grows with the grid: at the default 64x64 (10 fields, 200 solver steps)
a few tens of milliseconds of numpy on a quiet core, at 256x256 (``--dt 0.00625``, the
CFL-scaled step the example's GPU command uses: 800 steps) seconds. Worker mode
(``train.py --worker``, ``solver.py --worker``: `job_limit` processes that pay the
start-up once each and loop on `serve_simulations()`) saves one start-up per simulation
but one.

**What runs.** Two parts, each interleaved (A B A B ... or A B B A ...), medians:

* start-up against simulation: a fresh ``python`` process that imports what the solver
  imports before it computes (``navier_stokes.solver``, numpy, the client) and exits,
  timed from `subprocess.Popen` to its exit (the interpreter's start and those
  imports: what worker mode pays once per job rather than once per simulation), against
  one simulation of the solver (`solve` with the study's mid-range parameters, the
  seed of the pair) computed in this process. Row: ours = the simulation, baseline =
  the start-up, ratio = start-up / simulation (no target: it says which dominates);
* the study: `worker_study.run_study` (shared with `heat_worker.py`) with this solver, a `Launcher`
  on the local backend (``--job-limit``, the example's default 2) on the example's
  Latin hypercube, rank 0's `Receiver` and a thread draining its buffer (every
  (simulation, step) checked received once), timed from `Launcher.start` to the study
  done. Ours: worker mode; baseline: one process per simulation (the example's
  default). Ratio = baseline / ours (higher is better); target 1.0: worker mode no
  slower.

Every solver process, and this one, runs with ``OMP_NUM_THREADS=1`` (as the example
gives its solvers). The machine's load average before and after is printed beside the
figures (this project's machine is shared and busy: the figures are that load's too).

    python benchmarks/ns_worker.py                   # 64x64: 32 simulations, 5 rounds
    python benchmarks/ns_worker.py --grid-size 256 --simulations 8 --rounds 3
    python benchmarks/ns_worker.py --quick           # 16x16: 4 simulations, 1 round
    python benchmarks/ns_worker.py --json            # {"rows": [...]}
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy: one thread, as the solvers

import argparse  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(EXAMPLES))
from navier_stokes.flow_config import FlowConfig  # noqa: E402
from navier_stokes.solver import PARAMETER_BOUNDS, solve  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402
from worker_study import add_study_flags, both_modes, print_studies, study_row  # noqa: E402

SOLVER = EXAMPLES / "navier_stokes" / "solver.py"
#: what solver.py imports before it computes, as a fresh process runs it
STARTUP = (
    f"import sys; sys.path.insert(0, {str(EXAMPLES)!r}); "
    "import navier_stokes.solver; from melissa_trainer.client import Client"
)
#: the mid-range parameters of the study's ranges
MIDDLE = {name: (low + high) / 2 for name, (low, high) in PARAMETER_BOUNDS.items()}


def startup_seconds() -> float:
    """The wall time of a fresh process that starts Python and imports what the solver
    imports, from its launch to its exit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", STARTUP], check=True, env=env)
    return time.monotonic() - start


def simulation_seconds(config: FlowConfig, seed: int) -> float:
    """The wall time of one simulation (`solve`, every field) in this process."""
    start = time.monotonic()
    for _ in solve(MIDDLE, config, seed):
        pass
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    defaults = FlowConfig()
    parser.add_argument("--grid-size", type=int, default=defaults.grid_size)
    parser.add_argument("--time-steps", type=int, default=defaults.time_steps)
    parser.add_argument(
        "--dt", type=float, default=None, help="solver step; default 0.025 * 64 / grid size"
    )
    add_study_flags(parser, rounds="studies of each mode")
    parser.add_argument("--pairs", type=int, default=7, help="start-up/simulation pairs")
    add_flags(parser, quick="16x16: 4 simulations, 1 round of each, 2 pairs")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.grid_size, opts.simulations, opts.rounds, opts.pairs = 16, 4, 1, 2
    if opts.dt is None:
        opts.dt = defaults.dt * defaults.grid_size / opts.grid_size
    config = FlowConfig(opts.grid_size, opts.time_steps, defaults.interval, opts.dt)
    logging.basicConfig(level=logging.ERROR)  # (the start-up WARNING is expected here)
    load_before = os.getloadavg()[0]

    simulation_seconds(config, 0)  # warm-up: numpy's FFT plans, the page cache
    startup_seconds()
    pairs: dict[str, list[float]] = {"startup": [], "simulation": []}
    for i in range(opts.pairs):
        pairs["startup"].append(startup_seconds())
        pairs["simulation"].append(simulation_seconds(config, i))

    command = [sys.executable, str(SOLVER), *config.argv()]
    runs, med, load = both_modes(command, PARAMETER_BOUNDS, opts, "ns_worker-", load_before)

    startup, simulation = (statistics.median(pairs[k]) for k in ("startup", "simulation"))
    n = opts.grid_size
    grid = f"{n}x{n}, {opts.time_steps} fields, {config.substeps * opts.time_steps} steps"
    rows = [
        {
            "case": f"Navier-Stokes solver, {grid}: its simulation / a process's start-up",
            "ours": round(simulation, 4),
            "baseline": round(startup, 4),
            "unit": "s",
            "ratio": round(startup / simulation, 3),
            "target": None,
        },
        study_row(
            f"Navier-Stokes study wall, {opts.simulations} simulations of {grid}, "
            f"job_limit={opts.job_limit}: one process per simulation / worker mode",
            med,
        ),
    ]
    if opts.json:
        print_json(rows, medians=med, runs=runs, pairs=pairs, load=load, setup=vars(opts))
        return rows
    print(
        f"per simulation, {grid}: start-up {startup:.3f} s (runs {min(pairs['startup']):.3f} "
        f"to {max(pairs['startup']):.3f}), simulation {simulation:.3f} s (runs "
        f"{min(pairs['simulation']):.3f} to {max(pairs['simulation']):.3f}), medians of "
        f"{opts.pairs}"
    )
    print_studies(med, runs, load)
    print_rows(rows, "Navier-Stokes: worker mode against one process per simulation", width=60)
    return rows


if __name__ == "__main__":
    main()
