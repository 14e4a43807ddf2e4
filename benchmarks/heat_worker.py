"""The heat example's study in worker mode against one process per simulation.

The heat example's solver (`examples/heat_pde/solver.py`, the README's first command)
is a Python solver whose simulation is small (a 32x32 grid, 100 implicit steps: a few
tens of milliseconds of numpy) and whose start-up is the interpreter and its imports
(numpy, pyzmq, the client): most of each process's time, more so on a busy machine. The
launcher's start-up advice then names worker mode; the example's ``--worker`` runs
``solver.py --worker``, `job_limit` processes that pay the start-up once each and loop
on `next_simulation()`.

**What runs.** The example's study without its trainer: a `Launcher` on the local
backend (``--job-limit`` jobs) running the real solver with the example's defaults
(``--grid-size``, ``--time-steps``), rank 0's `Receiver` in this process and a thread
taking every sample out of its buffer (each checked: every (simulation, step) once).
Timed: from `Launcher.start` to the study done (every simulation finished, its data
received). Ours: worker mode (``solver.py --worker``); baseline: one process per
simulation (the example's default). Rounds alternate the two (A B B A ...), medians.
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
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "examples"))
from heat_pde.solver import PARAMETER_BOUNDS, HeatConfig  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.buffers import FIFOBuffer  # noqa: E402
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler  # noqa: E402
from melissa_trainer.launcher.backends.local import LocalBackend  # noqa: E402
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig  # noqa: E402

SOLVER = ROOT / "examples" / "heat_pde" / "solver.py"


def one_study(mode: str, opts: argparse.Namespace, root: Path) -> dict[str, float]:
    """Run one heat study in `mode` ("worker" or "process"); its wall time and split."""
    config = HeatConfig(opts.grid_size, opts.time_steps)
    command = [sys.executable, str(SOLVER), *config.argv()]
    return run_study(mode, command, PARAMETER_BOUNDS, opts, root)


def run_study(
    mode: str,
    command: list[str],
    bounds: dict[str, tuple[float, float]],
    opts: argparse.Namespace,
    root: Path,
) -> dict[str, float]:
    """Run one study of `command` (a solver taking ``--worker``) in `mode` ("worker":
    `opts.job_limit` workers; "process": one process per simulation) on
    `opts.simulations` parameter sets of the example's Latin hypercube over `bounds`,
    each sending `opts.time_steps` steps; asserts that every (simulation, step) was
    received once; returns its wall time and the launcher's split of it. Shared with
    `ns_worker.py` (the Navier-Stokes example's solver)."""
    work = Path(tempfile.mkdtemp(dir=root))
    buffer = FIFOBuffer(10_000)
    receiver = Receiver(
        buffer,
        config=ReceiverConfig(expected_simulations=opts.simulations, rendezvous_dir=work / "rdv"),
    )
    receiver.start()
    taken: Counter[tuple[int, int]] = Counter()

    def drain() -> None:
        while True:
            try:
                batch = buffer.get_batch(64, timeout=0.1)
            except TimeoutError:
                continue
            if not batch:
                return
            taken.update((int(s["simulation_id"]), int(s["time_step"])) for s in batch)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    launcher = Launcher(
        [*command, "--worker"] if mode == "worker" else command,
        make_sampler("lhs", bounds, seed=0),  # (the examples' sampler)
        opts.simulations,
        job_limit=opts.job_limit,
        backend=LocalBackend(),
        worker=mode == "worker",
        env={"OMP_NUM_THREADS": "1"},  # as the examples give their solvers
        tuning=LauncherTuning(poll_interval=0.05),
    )
    start = time.monotonic()
    try:
        launcher.start(work / "rdv", heartbeat=receiver.activity, data=receiver)
        while not launcher.done:
            launcher.check()
            time.sleep(0.02)
        wall = time.monotonic() - start
        reader.join(timeout=60)
    finally:
        launcher.stop()
        receiver.stop()
    expected = {(s, t): 1 for s in range(opts.simulations) for t in range(opts.time_steps)}
    assert taken == Counter(expected), (mode, sum(taken.values()))
    summary = launcher.summary()
    return {
        "wall": wall,
        "simulations_per_second": opts.simulations / wall,
        "startup_seconds": summary["startup_seconds"],
        "simulation_seconds": summary["simulation_seconds"],
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--job-limit", type=int, default=2, help="the example's default")
    parser.add_argument("--grid-size", type=int, default=HeatConfig.grid_size)
    parser.add_argument("--time-steps", type=int, default=HeatConfig.time_steps)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each mode")
    add_flags(parser, quick="4 simulations, 1 round of each")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.simulations, opts.rounds = 4, 1
    logging.basicConfig(level=logging.ERROR)  # (the start-up WARNING is expected here)
    load_before = os.getloadavg()[0]
    modes = ["worker", "process"]
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="heat_worker-") as tmp:
        for i in range(opts.rounds):
            for mode in modes if i % 2 == 0 else modes[::-1]:  # A B B A ...
                runs[mode].append(one_study(mode, opts, Path(tmp)))
    load = {"before": load_before, "after": os.getloadavg()[0], "cores": os.cpu_count()}
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in runs.items()}
    what = (
        f"{opts.simulations} simulations of {opts.grid_size}x{opts.grid_size}, "
        f"{opts.time_steps} steps, job_limit={opts.job_limit}"
    )
    ours, base = med["worker"]["wall"], med["process"]["wall"]
    rows = [
        {
            "case": f"heat example study wall, {what}: one process per simulation / worker mode",
            "ours": round(ours, 3),
            "baseline": round(base, 3),
            "unit": "s",
            "ratio": round(base / ours, 3),
            "target": 1.0,
        }
    ]
    if opts.json:
        print_json(rows, medians=med, runs=runs, load=load, setup=vars(opts))
        return rows
    for mode, m in med.items():
        print(
            f"{mode:>8}: {what}: study {m['wall']:.2f} s ({m['simulations_per_second']:.2f} "
            f"simulations/s); the launcher's startup_seconds {m['startup_seconds']:.1f}, "
            f"simulation_seconds {m['simulation_seconds']:.1f} (medians of {len(runs[mode])})"
        )
    print(
        f"load average {load['before']:.1f} before, {load['after']:.1f} after, on "
        f"{load['cores']} cores (a shared machine: the figures are its load's too)"
    )
    print_rows(rows, "worker mode against one process per simulation", width=60)
    return rows


if __name__ == "__main__":
    main()
