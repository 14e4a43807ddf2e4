"""What launching simulations costs the trainer, and how fast a launched one starts.

The local backend starts each job without forking the trainer (CPython's vfork path,
PR_SET_PDEATHSIG set by ``setpriv`` exec'd in front of the command; see
`melissa_trainer.launcher.backends.local`). main used a ``preexec_fn``, which makes
CPython fork the whole trainer; the benchmark keeps that launch (`ForkPathBackend`,
main's `Popen` call reimplemented in `launch_fork_path.py`) to compare in the same run.

**Steps.** This process is the trainer: torch imported, a real training loop (the
workload of ``benchmarks/trainer_overhead.py``: MLP 3 -> 256 -> 256 -> 1024, batch 64,
Adam, one torch thread) drawing its batches from a filled buffer (``--buffer-mb``,
default 150 MB: ~460 MB RSS in all, the trainer of the issue), into which 16 new samples
are written per step (the receiver's puts). A launcher thread of the same process
starts 10 simulations per second through a real `LocalBackend` (each ``true``, exiting
at once: the cost measured is the launch, not the simulation's CPU; each with its log
file), and polls them as the launcher's supervisor does. Rounds of ``--seconds`` (1 s)
of training with launches (ours), with the fork path's launches, and with none, in
rotating order, 30 of each: short rounds finely interleaved, since the speed of a
shared 2-core machine drifts by 20% and more over tens of seconds; medians of the
steps/s. Target: with launches >= 0.95x without.

**Latency.** From the call that starts a simulation to its first line read by the
launcher. The simulation is a Python script that prints a line at once (``python
sim.py``: a realistic start, the interpreter's with its site packages) and also
``/bin/echo``, where nothing but the launch is left to time. Ours: `LocalBackend.launch`
from this big process (idle meanwhile), its log file a FIFO read here. Baseline:
``os.posix_spawn`` (new session, stdout a pipe) from a small Python process that imported
no torch. One launch of each in turn, medians; ratio = baseline / ours (higher is
better), target >= 0.8 for the Python script (`launch_latency.py`).

No CPU is pinned unless ``--cpus`` says so (written for 2 cores).

    python benchmarks/launch_cost.py            # about 2 minutes
    python benchmarks/launch_cost.py --quick    # about 20 s
    python benchmarks/launch_cost.py --json     # {"rows": [...], "setup": {...}}
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from launch_fork_path import ForkPathBackend  # noqa: E402
from launch_latency import measure_latency  # noqa: E402
from report import add_flags, print_json, print_rows  # noqa: E402
from trainer_overhead import BATCH, make_model  # noqa: E402

from melissa_trainer.launcher.backends import Job, LocalBackend  # noqa: E402
from melissa_trainer.launcher.backends.pdeathsig import pdeathsig_wrapper  # noqa: E402

STEPS_TARGET = 0.95
LATENCY_TARGET = 0.8
RATE = 10.0  # launches per second
SAMPLE = 3 + 1024  # float32 values of one sample: parameters and field
STEPS_CASE = (
    "trainer steps/s while the launcher starts 10 short simulations per second / "
    "steps/s with no launches"
)


# -- the trainer --------------------------------------------------------------------------


class Trainer:
    """The training loop over a filled buffer (see the module docstring)."""

    def __init__(self, buffer_mb: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        rows = max(buffer_mb * 2**20 // (4 * SAMPLE), 4 * BATCH)
        self.buffer = rng.standard_normal((rows, SAMPLE), dtype=np.float32)  # filled
        self.incoming = rng.standard_normal((16, SAMPLE), dtype=np.float32)
        self.rng = rng
        self.position = 0
        self.model = make_model(seed)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)

    def step(self) -> None:
        rows = len(self.buffer)
        end = self.position + len(self.incoming)
        if end > rows:
            self.position, end = 0, len(self.incoming)
        self.buffer[self.position : end] = self.incoming  # the receiver's puts
        self.position = end
        batch = torch.from_numpy(self.buffer[self.rng.integers(0, rows, BATCH)])
        loss = torch.nn.functional.mse_loss(self.model(batch[:, :3]), batch[:, 3:])
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def rate(self, seconds: float) -> float:
        """Steps per second over `seconds` of training."""
        steps, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            self.step()
            steps += 1
        return steps / elapsed


class Launching:
    """A thread that launches `argv` `RATE` times a second through `backend` and polls
    the running jobs, as the launcher's supervisor thread does; `stop` kills the rest."""

    def __init__(self, backend: LocalBackend, argv: list[str], logs: Path) -> None:
        self.backend, self.argv, self.logs = backend, argv, logs
        self.done = threading.Event()
        self.launched = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        running: list[Any] = []
        due = time.monotonic()
        while not self.done.is_set():
            log = self.logs / f"sim-{self.launched % 100}.log"
            job = Job(f"sim-{self.launched}", self.argv, log_path=log)
            running.append(self.backend.launch(job))
            self.launched += 1
            running = [h for h in running if self.backend.poll(h) is None]
            due += 1 / RATE
            self.done.wait(max(due - time.monotonic(), 0.0))
        for handle in running:
            self.backend.kill(handle, grace=1.0)

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.launched


def measure_steps(
    trainer: Trainer, rounds: int, seconds: float, logs: Path
) -> tuple[dict[str, list[float]], dict[str, int], dict[str, int]]:
    """steps/s per round for "launches" (ours), "fork" (main's) and "none", rotating
    the order; how many launches each mode made; the trainer process's minor page
    faults in each mode (all its rounds)."""
    true = shutil.which("true") or "/bin/true"
    backends = {"launches": LocalBackend(), "fork": ForkPathBackend()}
    modes = ["launches", "none", "fork"]
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    launched = dict.fromkeys(backends, 0)
    faults = dict.fromkeys(modes, 0)
    trainer.rate(min(seconds, 1.0))  # warm-up
    for r in range(rounds):
        for mode in modes[r % 3 :] + modes[: r % 3]:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            launching = Launching(backends[mode], [true], logs) if mode in backends else None
            rates[mode].append(trainer.rate(seconds))
            if launching is not None:
                launched[mode] += launching.stop()
            faults[mode] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    for backend in backends.values():
        backend.close()
    return rates, launched, faults


# -- the table ----------------------------------------------------------------------------


def row(case: str, ours: float, base: float, unit: str, ratio: float, target: Any) -> dict:
    return {
        "case": case,
        "ours": round(ours, 3),
        "baseline": round(base, 3),
        "unit": unit,
        "ratio": round(ratio, 3),
        "target": target,
    }


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each mode")
    parser.add_argument("--seconds", type=float, default=None, help="training per round")
    parser.add_argument("--launches", type=int, default=None, help="latency: launches of each")
    parser.add_argument("--buffer-mb", type=int, default=150, help="the filled buffer")
    parser.add_argument("--cpus", default=None, help="pin to these CPUs, e.g. 0,1")
    opts = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("launch_cost.py measures the Linux launch path (vfork, /proc)")
    if opts.cpus:
        os.sched_setaffinity(0, {int(c) for c in opts.cpus.split(",")})
    rounds = opts.rounds or (6 if opts.quick else 30)
    seconds = opts.seconds or (0.5 if opts.quick else 1.0)
    launches = opts.launches or (8 if opts.quick else 40)
    torch.set_num_threads(1)

    trainer = Trainer(opts.buffer_mb)
    trainer.rate(0.5)
    rss = rss_mb()
    with tempfile.TemporaryDirectory(prefix="mt-launch-cost-") as tmp:
        directory = Path(tmp)
        (directory / "logs").mkdir()
        rates, launched, faults = measure_steps(trainer, rounds, seconds, directory / "logs")
        sim = directory / "sim.py"
        sim.write_text("print('ready', flush=True)\n")
        python = measure_latency([sys.executable, str(sim)], launches, directory, fork=True)
        echo_argv = [shutil.which("echo") or "/bin/echo", "ready"]
        (directory / "echo").mkdir()
        echo = measure_latency(echo_argv, 5 * launches, directory / "echo", fork=False)

    steps = {mode: statistics.median(values) for mode, values in rates.items()}
    ms = 1000.0
    rows = [
        row(STEPS_CASE, steps["launches"], steps["none"], "steps/s",
            steps["launches"] / steps["none"], STEPS_TARGET),
        row("the same, fork path (main's preexec_fn)", steps["fork"], steps["none"],
            "steps/s", steps["fork"] / steps["none"], None),
        row("launch latency (call to first line of the simulation), posix_spawn from a "
            "small process / ours", python["ours"] * ms, python["baseline"] * ms, "ms",
            python["baseline"] / python["ours"], LATENCY_TARGET),
        row("the same, fork path (main's preexec_fn)", python["fork"] * ms,
            python["baseline"] * ms, "ms", python["baseline"] / python["fork"], None),
        row("the same, /bin/echo", echo["ours"] * ms, echo["baseline"] * ms, "ms",
            echo["baseline"] / echo["ours"], None),
        row("the launch call in the trainer, fork path / ours", python["call_ours"] * ms,
            python["call_fork"] * ms, "ms", python["call_fork"] / python["call_ours"], None),
    ]  # fmt: skip
    wrapper = pdeathsig_wrapper()
    setup = {
        "trainer_rss_mb": round(rss, 1),
        "wrapper": wrapper,
        "rounds": rounds,
        "seconds": seconds,
        "launches_per_round": {m: round(n / rounds, 1) for m, n in launched.items()},
        "steps_per_s": {m: [round(v, 1) for v in values] for m, values in rates.items()},
        "trainer_minor_faults_per_round": {m: round(n / rounds) for m, n in faults.items()},
        "latency_launches": launches,
        "cpus": len(os.sched_getaffinity(0)),
    }
    if opts.json:
        print_json(rows, setup=setup)
        return
    print(
        f"\ntrainer: {rss:.0f} MB RSS, MLP 3-256-256-1024, batch {BATCH}, Adam, 1 thread; "
        f"{rounds} rounds of {seconds:g} s per mode, launches of `true` at {RATE:g}/s "
        f"({setup['launches_per_round']} per round; the trainer's minor page faults per "
        f"round: {setup['trainer_minor_faults_per_round']}); latency: medians of {launches} "
        f"launches ({5 * launches} of echo); jobs start with "
        f"{'setpriv' if wrapper not in (None, 'python') else wrapper}; "
        f"{setup['cpus']} CPUs"
    )
    print_rows(rows, "Launch cost (ratio: higher is better)", width=64)


if __name__ == "__main__":
    main()
