"""What `heat_worker.py` and `ns_worker.py` share: an example's study of its Python
solver in worker mode against one process per simulation, without the trainer.

`run_study` runs one study (a `Launcher` on the local backend, rank 0's `Receiver` in
this process and a thread draining its buffer, every (simulation, step) checked received
once), timed from `Launcher.start` to the study done; `both_modes` runs ``--rounds`` of
each mode, interleaved (A B B A ...); `study_row` is the row of their median walls
(ours: worker mode; baseline: one process per simulation; target 1.0: worker mode no
slower), and `print_studies` the lines both benchmarks print of them and of the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

#: the two modes, in the order of a round
MODES = ("worker", "process")
#: mode -> one dict per study (`run_study`'s)
Runs = dict[str, list[dict[str, float]]]


def add_study_flags(parser: argparse.ArgumentParser, rounds: str) -> None:
    """Add ``--simulations`` (32), ``--job-limit`` (2, the examples' default) and
    ``--rounds`` (5; help `rounds`) to `parser`."""
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--job-limit", type=int, default=2, help="the example's default")
    parser.add_argument("--rounds", type=int, default=5, help=rounds)


def launch_to_end(
    launcher: Launcher, receiver: Receiver, reader: threading.Thread, rendezvous: Path
) -> float:
    """Run `launcher`'s study to its end against `receiver` (whose samples `reader`
    takes), then stop both; the study's wall time in seconds, launch to last exit."""
    start = time.monotonic()
    try:
        launcher.start(rendezvous, heartbeat=receiver.activity, data=receiver)
        while not launcher.done:
            launcher.check()
            time.sleep(0.02)  # (the launcher's own poll: a benchmark's loop, not a test)
        wall = time.monotonic() - start
        reader.join(timeout=60)
    finally:
        launcher.stop()
        receiver.stop()
    return wall


def run_study(
    mode: str,
    command: list[str],
    bounds: dict[str, tuple[float, float]],
    opts: argparse.Namespace,
    root: Path,
) -> dict[str, float]:
    """Run one study of `command` (a solver taking ``--worker``) in `mode` ("worker":
    `opts.job_limit` workers; "process": one process per simulation) on
    `opts.simulations` parameter sets of the examples' Latin hypercube over `bounds`,
    each sending `opts.time_steps` steps; asserts that every (simulation, step) was
    received once; returns its wall time and the launcher's split of it."""
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
    wall = launch_to_end(launcher, receiver, reader, work / "rdv")
    expected = {(s, t): 1 for s in range(opts.simulations) for t in range(opts.time_steps)}
    assert taken == Counter(expected), (mode, sum(taken.values()))
    summary = launcher.summary()
    return {
        "wall": wall,
        "simulations_per_second": opts.simulations / wall,
        "startup_seconds": summary["startup_seconds"],
        "simulation_seconds": summary["simulation_seconds"],
    }


def both_modes(
    command: list[str],
    bounds: dict[str, tuple[float, float]],
    opts: argparse.Namespace,
    prefix: str,
    load_before: float,
) -> tuple[Runs, dict[str, dict[str, float]], dict[str, Any]]:
    """`opts.rounds` studies (`run_study`) of each mode, interleaved A B B A ..., in a
    temporary folder (named from `prefix`) removed at the end: the runs, their medians
    (`medians`) and the load (`load_since(load_before)`, read when the benchmark
    started)."""
    runs: Runs = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for i in range(opts.rounds):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:  # A B B A ...
                runs[mode].append(run_study(mode, command, bounds, opts, Path(tmp)))
    return runs, medians(runs), load_since(load_before)


def medians(runs: Runs) -> dict[str, dict[str, float]]:
    """Mode -> the median of each of its studies' figures."""
    return {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in runs.items()}


def load_since(before: float) -> dict[str, Any]:
    """The load average `before` (``os.getloadavg()[0]``, read when the benchmark
    started) and now, and the cores: printed beside the figures."""
    return {"before": before, "after": os.getloadavg()[0], "cores": os.cpu_count()}


def study_row(case: str, med: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The row of the studies' median walls: ours worker mode, baseline one process per
    simulation, ratio baseline / ours (higher is better), target 1.0."""
    ours, base = med["worker"]["wall"], med["process"]["wall"]
    return {
        "case": case,
        "ours": round(ours, 3),
        "baseline": round(base, 3),
        "unit": "s",
        "ratio": round(base / ours, 3),
        "target": 1.0,
    }


def print_studies(
    med: dict[str, dict[str, float]], runs: Runs, load: dict[str, Any], what: str = ""
) -> None:
    """One line per mode (`what`: what was run, before the figures), then the load."""
    for mode, m in med.items():
        print(
            f"{mode:>8}: {what}study {m['wall']:.2f} s ({m['simulations_per_second']:.2f} "
            f"simulations/s); the launcher's startup_seconds {m['startup_seconds']:.1f}, "
            f"simulation_seconds {m['simulation_seconds']:.1f} (medians of {len(runs[mode])})"
        )
    print(
        f"load average {load['before']:.1f} before, {load['after']:.1f} after, on "
        f"{load['cores']} cores (a shared machine: the figures are its load's too)"
    )
