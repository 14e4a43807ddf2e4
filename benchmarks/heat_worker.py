"""The heat example's study in worker mode against one process per simulation.

The heat example's solver (`examples/heat_pde/solver.py`, the README's first command)
is a Python solver whose simulation is small (a 32x32 grid, 100 implicit steps: a few
tens of milliseconds of numpy) and whose start-up is the interpreter and its imports
(numpy, pyzmq, the client): most of each process's time, more so on a busy machine. The
launcher's start-up advice then names worker mode; the example's ``--worker`` runs
``solver.py --worker``, `job_limit` processes that pay the start-up once each and loop
on `serve_simulations()`.

**What runs.** The example's study without its trainer: a `Launcher` on the local
backend (``--job-limit`` jobs) running the real solver with the example's defaults
(``--grid-size``, ``--time-steps``), rank 0's `Receiver` in this process and a thread
taking every sample out of its buffer (each checked: every (simulation, step) once).
Timed: from `Launcher.start` to the study done (every simulation finished, its data
received). Ours: worker mode (``solver.py --worker``); baseline: one process per
simulation (the example's default). Rounds alternate the two (A B B A ...), medians.
The study, its rounds and their row are `worker_study.py`'s, shared with `ns_worker.py`.
Ratio = baseline / ours (higher is better); target 1.0: worker mode no slower. The
machine's load average before and after is printed beside the figures (this project's
machine is shared and busy: the figures are that load's too).

    python benchmarks/heat_worker.py                 # 32 simulations, 5 rounds each
    python benchmarks/heat_worker.py --quick         # 4 simulations, 1 round each
    python benchmarks/heat_worker.py --json          # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "examples"))
from heat_pde.solver import PARAMETER_BOUNDS, HeatConfig  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402
from worker_study import add_study_flags, both_modes, print_studies, study_row  # noqa: E402

SOLVER = ROOT / "examples" / "heat_pde" / "solver.py"


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_study_flags(parser, rounds="runs of each mode")
    parser.add_argument("--grid-size", type=int, default=HeatConfig.grid_size)
    parser.add_argument("--time-steps", type=int, default=HeatConfig.time_steps)
    add_flags(parser, quick="4 simulations, 1 round of each")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.simulations, opts.rounds = 4, 1
    logging.basicConfig(level=logging.ERROR)  # (the start-up WARNING is expected here)
    load_before = os.getloadavg()[0]
    config = HeatConfig(opts.grid_size, opts.time_steps)
    command = [sys.executable, str(SOLVER), *config.argv()]
    runs, med, load = both_modes(command, PARAMETER_BOUNDS, opts, "heat_worker-", load_before)
    what = (
        f"{opts.simulations} simulations of {opts.grid_size}x{opts.grid_size}, "
        f"{opts.time_steps} steps, job_limit={opts.job_limit}"
    )
    case = f"heat example study wall, {what}: one process per simulation / worker mode"
    rows = [study_row(case, med)]
    if opts.json:
        print_json(rows, medians=med, runs=runs, load=load, setup=vars(opts))
        return rows
    print_studies(med, runs, load, f"{what}: ")
    print_rows(rows, "worker mode against one process per simulation", width=60)
    return rows


if __name__ == "__main__":
    main()
