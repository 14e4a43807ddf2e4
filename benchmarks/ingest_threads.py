"""Where the pinned core's time goes, per step and per thread: ours against a raw PULL thread.

The pinned row of `benchmarks/ingest.py` (this process on one core, a client streaming
1 KB fields at 20k msgs/s from another, the `trainer_overhead` workload on a reservoir)
compares the step rate beside the stream with the step alone, for ours and for a raw
pyzmq PULL thread of the training process (receives and discards). On one core, wall
time is the sum of what every thread of the process ran there, what other processes ran
there (the scheduler's run delay of the training thread) and what the training thread
slept. This splits that, per timed step, from the kernel's own accounts
(``/proc/self/task/*/schedstat``: each thread's CPU time and run delay), for the
workload alone (pre-filled), beside the stream into ours (`StreamSource`) and beside the
stream into the raw PULL thread, interleaved, medians:

* the training thread's CPU (the step, and ours' pumps and draws in it);
* ZeroMQ's I/O thread (both receive the same stream through one);
* our other threads (the receiver's, which naps while the training thread pumps, and
  the connection watch) or the raw PULL thread;
* the run delay (other processes on this core: a busy machine's, not ours);
* the stop of the source after the loop (`OnlineTrainer` stops it before TRAIN_END,
  where `ingest.py`'s clock stops: inside its timed window).

Thread CPU time is what a busy machine disturbs least (its caches and memory bus still
do); the run delay row says how busy the core was. Rows: each part in microseconds per
step, ours against the raw thread (ratio: raw / ours, higher is better; None where ours
is 0), and the training thread's CPU of each against the step alone.

    python benchmarks/ingest_threads.py            # 800 steps, 3 rounds
    python benchmarks/ingest_threads.py --quick --json
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as bench  # noqa: E402
import ingest_training as training  # noqa: E402
import trainer_overhead as overhead  # noqa: E402
from report import add_flags, finish, print_json  # noqa: E402

#: the parts, in the rows' order: (key, what)
PARTS = (
    ("wall", "wall time per step, to the loop's end"),
    ("train", "the training thread's CPU"),
    ("zmq_io", "ZeroMQ's I/O threads"),
    ("others", "the process's other threads (ours: receiver, connection watch; raw: its thread)"),
    ("delay", "run delay of the training thread (other processes on this core)"),
    ("stop", "the source's stop after the loop (inside ingest.py's timed window)"),
)


def thread_times() -> dict[int, tuple[str, int, int]]:
    """Thread id -> (name, CPU ns, run delay ns) of this process's threads (Linux)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu, delay, _ = map(int, f.read().split())
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
        out[int(tid)] = (names.get(int(tid), comm), cpu, delay)
    return out


def split(start: tuple[float, dict], end: tuple[float, dict], stopped: float, n: int) -> dict:
    """Microseconds per step of each part of `PARTS` between two `thread_times` marks
    (with their wall clocks) over `n` steps; `stopped`: the wall clock after the stop."""
    (w0, before), (w1, after) = start, end
    main = threading.main_thread().native_id
    parts: collections.Counter[str] = collections.Counter()
    for tid, (name, cpu, delay) in after.items():
        _, cpu0, delay0 = before.get(tid, (name, 0, 0))
        if tid == main:
            parts["train"] += cpu - cpu0
            parts["delay"] += delay - delay0
        elif name.startswith("ZMQbg/IO"):
            parts["zmq_io"] += cpu - cpu0
        else:
            parts["others"] += cpu - cpu0
    out = {k: v / 1e3 / n for k, v in parts.items()}
    out["wall"] = (w1 - w0) / n * 1e6
    out["stop"] = (stopped - w1) / n * 1e6
    return out


def one_run(arm: str, steps: int, out: str, r: int, sim_core: int) -> dict[str, float]:
    """The parts per timed step of one run of `arm` ("alone", "ours" or "raw")."""
    marks: dict[str, Any] = {}

    class Clock(bench.StepClock):  # the marks: after the warm-up, at the loop's end
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_step_end(trainer, state, control)
            if state.global_step == self.warmup:
                marks["start"] = (time.perf_counter(), thread_times())

        def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
            marks["end"] = (time.perf_counter(), thread_times())
            marks["steps"] = state.global_step - self.warmup

        def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_train_end(trainer, state, control)
            marks["stopped"] = time.perf_counter()

    samples = [{"u": u} for u in bench.distinct_fields(bench.KB, overhead.N_SAMPLES)]
    # the clock run_training builds: the name in ingest_training, where it is read
    clock_class, training.StepClock = training.StepClock, Clock
    try:
        if arm == "ours":
            bench.run_streamed(
                bench.KB, 20_000.0, steps, out, r, overhead.N_SAMPLES, False, sim_core
            )
        elif arm == "raw":
            with bench.RawPullThread() as raw:
                client = bench.stream_client(
                    raw.endpoint, bench.KB, 20_000.0, len(samples), sim_core
                )
                try:
                    source = overhead.Prefilled(samples)
                    bench.run_training(source, steps, out, r, bench.streamed_sample, len(samples))
                finally:
                    client.kill()
                    client.wait()
        else:
            source = overhead.Prefilled(samples)
            bench.run_training(source, steps, out, r, bench.streamed_sample, len(samples))
    finally:
        training.StepClock = clock_class
    return split(marks["start"], marks["end"], marks["stopped"], marks["steps"])


def rows_of(runs: dict[str, list[dict[str, float]]]) -> list[dict[str, Any]]:
    def med(arm: str, part: str) -> float:
        return statistics.median(run.get(part, 0.0) for run in runs[arm])

    label = "pinned 1 KB stream, the core's time per step"
    rows = []
    for part, what in PARTS:
        ours, raw = med("ours", part), med("raw", part)
        rows.append(
            {
                "case": f"{label}: {what} (baseline: the raw PULL thread's run)",
                "ours": round(ours, 1),
                "baseline": round(raw, 1),
                "unit": "us/step",
                "ratio": round(raw / ours, 3) if ours > 0 else None,
                "target": None,
            }
        )
    alone = med("alone", "train")
    for arm, what in (("ours", "ours"), ("raw", "the raw PULL thread's run")):
        train = med(arm, "train")
        rows.append(
            {
                "case": f"{label}: the training thread's CPU, {what} (baseline: alone)",
                "ours": round(train, 1),
                "baseline": round(alone, 1),
                "unit": "us/step",
                "ratio": round(alone / train, 3),
                "target": None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="200 steps, 1 round")
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args()
    rounds = opts.rounds or (1 if opts.quick else 3)
    steps = 200 if opts.quick else 800
    torch.set_num_threads(1)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2 or not os.path.exists("/proc/self/task"):
        print("skipped: needs Linux and 2 cores (a pinned training core and a client's)")
        if opts.json:
            print_json([])
        return
    out = tempfile.mkdtemp(prefix="mt-ingest-threads-")
    runs: dict[str, list[dict[str, float]]] = {"alone": [], "ours": [], "raw": []}
    bench.pin_process({cores[0]})
    try:
        samples = [{"u": u} for u in bench.distinct_fields(bench.KB, overhead.N_SAMPLES)]
        bench.run_training(  # warm-up
            overhead.Prefilled(samples), 50, out, 0, bench.streamed_sample, len(samples)
        )
        for r in range(rounds):
            for arm in runs:
                runs[arm].append(one_run(arm, steps, out, r, cores[1]))
    finally:
        bench.pin_process(set(cores))
        shutil.rmtree(out, ignore_errors=True)
    rows = rows_of(runs)
    title = f"medians of {rounds} interleaved rounds, pinned to core {cores[0]}"
    finish(rows, title, 110, as_json=opts.json)


if __name__ == "__main__":
    main()
