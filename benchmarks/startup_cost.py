"""A solver with an expensive start-up: one process per simulation against worker mode.

A solver that compiles itself at start-up (numba's JIT, a mesh, a licence check) pays
that cost in every simulation's process; `Launcher(..., worker=True)` starts `job_limit`
long-lived workers that pay it once each and then run one simulation after another
(`melissa_trainer.client.worker.next_simulation`). Here a sleep of ``--startup`` seconds
at start-up stands in for the JIT (it takes no CPU: a real JIT's would also compete
with the trainer for the cores, which worker mode spares as well).

**What runs.** A real study, without a trainer: a `Launcher` on the local backend
(``--job-limit`` jobs), rank 0's `Receiver` in this process and a thread taking every
sample out of its buffer. ``--simulations`` simulations, each sending ``--steps`` fields
of 64x64 float32 at once after its start-up. Timed: from `Launcher.start` to the study
done (every simulation finished, its data received). Ours: worker mode (the solver
loops on `next_simulation`); baseline: one process per simulation (the default).
Rounds alternate the two (A B A B ...), medians. Ratio = baseline / ours (higher is
better); the target, ``simulations / job_limit / 2``, is half the ideal (start-up paid
once per worker instead of once per simulation).

Each run also prints the launcher's own figures (`Launcher.summary()`:
``startup_seconds``, part of ``simulation_seconds`` one process per simulation, the
workers' start-ups beside it in worker mode), which the per-simulation run's start-up
report (a WARNING) also names.

    python benchmarks/startup_cost.py                    # 16 simulations, 2 s start-up: ~1 min
    python benchmarks/startup_cost.py --quick            # ~10 s
    python benchmarks/startup_cost.py --startup 60 --simulations 32 --rounds 1 --only worker
    python benchmarks/startup_cost.py --json             # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, print_json, print_rows  # noqa: E402
from worker_study import launch_to_end  # noqa: E402

from melissa_trainer.buffers import FIFOBuffer  # noqa: E402
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler  # noqa: E402
from melissa_trainer.launcher.backends.local import LocalBackend  # noqa: E402
from melissa_trainer.stream.receiver import Receiver  # noqa: E402
from melissa_trainer.stream.receiver_config import ReceiverConfig

SOLVER = r"""
import sys, time
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

startup, steps, worker = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "worker"
time.sleep(startup)  # (the JIT's compile time: paid once per process)
FIELDS = {"u": ((64, 64), "float32")}


def run(client):
    k = client.parameters["k"]
    for t in range(steps):
        client.send(t, u=np.full((64, 64), k * t, np.float32))


if worker:
    while (work := next_simulation()) is not None:
        sid, parameters = work
        with Client(FIELDS, simulation_id=sid, parameters=parameters) as client:
            run(client)
else:
    with Client(FIELDS) as client:
        run(client)
"""


def one_study(mode: str, opts: argparse.Namespace, root: Path) -> dict[str, float]:
    """Run one study in `mode` ("worker" or "process"); its wall time and split."""
    work = Path(tempfile.mkdtemp(dir=root))
    script = work / "solver.py"
    script.write_text(textwrap.dedent(SOLVER))
    buffer = FIFOBuffer(10_000)
    config = ReceiverConfig(expected_simulations=opts.simulations, rendezvous_dir=work / "rdv")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    taken = 0

    def drain() -> None:
        nonlocal taken
        while True:
            try:
                batch = buffer.get_batch(64, timeout=0.1)
            except TimeoutError:
                continue
            if not batch:
                return
            taken += len(batch)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    launcher = Launcher(
        [sys.executable, str(script), str(opts.startup), str(opts.steps), mode],
        make_sampler("uniform", {"k": (0.1, 1.0)}, seed=0),
        opts.simulations,
        job_limit=opts.job_limit,
        backend=LocalBackend(),
        worker=mode == "worker",
        tuning=LauncherTuning(poll_interval=0.05),
    )
    wall = launch_to_end(launcher, receiver, reader, work / "rdv")
    assert taken == opts.simulations * opts.steps, (taken, mode)
    summary = launcher.summary()
    return {
        "wall": wall,
        "startup_seconds": summary["startup_seconds"],
        "simulation_seconds": summary["simulation_seconds"],
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--job-limit", type=int, default=2)
    parser.add_argument("--startup", type=float, default=2.0, help="seconds, per process")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["worker", "process"], help="run one mode alone")
    add_flags(parser, quick="4 simulations, 0.5 s, 1 round")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.simulations, opts.startup, opts.rounds = 4, 0.5, 1
    logging.basicConfig(level=logging.ERROR)  # (the start-up WARNING is expected here)
    modes = [opts.only] if opts.only else ["worker", "process"]
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="startup_cost-") as tmp:
        for i in range(opts.rounds):
            for mode in modes if i % 2 == 0 else modes[::-1]:  # A B B A ...
                runs[mode].append(one_study(mode, opts, Path(tmp)))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in runs.items()}
    what = (
        f"{opts.simulations} simulations, {opts.startup:g} s start-up each, "
        f"job_limit={opts.job_limit}"
    )
    rows: list[dict[str, Any]] = []
    if len(modes) == 2:
        ours, base = med["worker"]["wall"], med["process"]["wall"]
        rows.append(
            {
                "case": f"study wall time, {what}: one process per simulation / worker mode",
                "ours": round(ours, 3),
                "baseline": round(base, 3),
                "unit": "s",
                "ratio": round(base / ours, 3),
                "target": round(opts.simulations / opts.job_limit / 2, 3),
            }
        )
    if opts.json:
        print_json(rows, medians=med, setup=vars(opts))
        return rows
    for mode, m in med.items():
        print(
            f"{mode:>8}: {what}: study {m['wall']:.1f} s; start-up {m['startup_seconds']:.1f} s, "
            f"simulation time {m['simulation_seconds']:.1f} s (medians of {len(runs[mode])})"
        )
    if rows:
        print_rows(rows, "worker mode against one process per simulation", width=60)
    return rows


if __name__ == "__main__":
    main()
