"""Where the training thread's CPU goes, per step, while 1 KB fields stream into it.

The pinned row of `benchmarks/ingest.py` (this process on one core, a client streaming
1 KB fields at 20k msgs/s from another, the `trainer_overhead` workload on a reservoir)
says how much slower a step is beside the stream than alone; this says where the
training thread's CPU goes in it: the pumps of the receiver (`IngestLoop.pump`: the
receive, decode, dedup, the block of samples, and the buffer's puts), the buffer's puts
inside them (`put_available`: the trainer's reservoir, by column for these 1 KB rows,
scatters a block's rows there; a plain one builds per-sample dicts and frees the
evicted ones), the receiver's own share (the pumps less the puts), the buffer's draws
(a gather and per-sample views by column), and what is left of the difference with
the same workload alone (pre-filled, the same buffer): outside the pumps and draws (the
collate of samples fresh from the network, the scheduler's and ZeroMQ's work on this
core). Thread CPU time
(`time.thread_time`) of the training thread only, summed over the timed steps (after 50
warm-up steps; not the set-up); alone and streamed alternate, medians.

Rows: the total thread CPU per step, ours (streamed) against alone (ratio: alone /
ours); then each part, in microseconds per step, against the step alone (ratio: the
share of a step alone that the part leaves, 1 - part / step alone).

    python benchmarks/ingest_split.py            # 800 steps, 3 rounds
    python benchmarks/ingest_split.py --quick --json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer
from melissa_trainer.stream.ingest_loop import IngestLoop

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as bench  # noqa: E402
import ingest_training as training  # noqa: E402
import trainer_overhead as overhead  # noqa: E402
from report import add_flags, finish  # noqa: E402

#: (owner, method, part) timed in the training thread (the trainer's reservoir is
#: columnar for this workload's 1 KB rows, the plain one's methods are timed too: a
#: part is timed once however its calls nest)
TIMED = (
    (IngestLoop, "pump", "pump"),
    (ReservoirBuffer, "put_available", "put"),
    (ColumnarReservoirBuffer, "put_available", "put"),
    (ReservoirBuffer, "get_batch", "draws"),
    (ColumnarReservoirBuffer, "get_batch", "draws"),
)


@contextlib.contextmanager
def timed(seconds: collections.Counter[str]) -> Iterator[None]:
    """`TIMED` methods wrapped to add the calling thread's CPU time to `seconds[part]`
    when called from this thread (the training thread); restored on exit."""
    me = threading.get_ident()
    saved = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in TIMED]
    depth: collections.Counter[str] = collections.Counter()  # calls of a part under way

    def wrap(method: Any, part: str) -> Any:
        def timed_method(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != me or depth[part]:
                return method(*args, **kwargs)
            depth[part] += 1
            t0 = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                seconds[part] += time.thread_time() - t0
                depth[part] -= 1

        return timed_method

    for owner, name, part in TIMED:
        setattr(owner, name, wrap(getattr(owner, name), part))
    try:
        yield
    finally:
        for owner, name, method in saved:
            if method is None:  # inherited: the wrapper goes, the base's shows again
                delattr(owner, name)
            else:
                setattr(owner, name, method)


def one_run(streamed: bool, steps: int, out: str, r: int, core: int | None) -> dict[str, float]:
    """Microseconds of the training thread's CPU per timed step (after the 50 warm-up
    steps, as `ingest.StepClock` times them: not the trainer's set-up, nor the filling
    of the pre-filled run's buffer, whose cost differs with the buffer's store): in
    all, and per part."""
    samples = [{"u": u} for u in bench.distinct_fields(bench.KB, overhead.N_SAMPLES)]
    seconds: collections.Counter[str] = collections.Counter()
    marks: dict[str, Any] = {}

    class Clock(bench.StepClock):  # the training thread's CPU and parts, from the warm-up
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_step_end(trainer, state, control)
            if state.global_step == self.warmup:
                marks["start"] = (time.thread_time(), collections.Counter(seconds))

        def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_train_end(trainer, state, control)
            marks["end"] = (time.thread_time(), collections.Counter(seconds), self.steps)

    # the clock run_training builds: the name in ingest_training, where it is read
    clock_class, training.StepClock = training.StepClock, Clock
    try:
        with timed(seconds):
            if streamed:
                bench.run_streamed(
                    bench.KB, 20_000.0, steps, out, r, overhead.N_SAMPLES, False, core
                )
            else:
                source = overhead.Prefilled(samples)
                bench.run_training(source, steps, out, r, bench.streamed_sample, overhead.N_SAMPLES)
    finally:
        training.StepClock = clock_class
    (t0, parts0), (t1, parts1, n) = marks["start"], marks["end"]
    parts1.subtract(parts0)
    return {"total": (t1 - t0) / n * 1e6, **{k: v / n * 1e6 for k, v in parts1.items()}}


def rows_of(runs: dict[str, list[dict[str, float]]]) -> list[dict[str, Any]]:
    def med(kind: str, part: str) -> float:
        return statistics.median(run.get(part, 0.0) for run in runs[kind])

    alone, ours = med("alone", "total"), med("ours", "total")
    pump, put = med("ours", "pump"), med("ours", "put")
    draws_o, draws_a = med("ours", "draws"), med("alone", "draws")
    rest = (ours - pump - draws_o) - (alone - draws_a)
    label = "pinned 1 KB stream, training thread CPU per step"
    rows = [
        {
            "case": f"{label}: in all (baseline: alone)",
            "ours": round(ours, 1),
            "baseline": round(alone, 1),
            "unit": "us/step",
            "ratio": round(alone / ours, 3),
            "target": None,
        }
    ]
    for part, value in (
        ("the receiver's pumps, in all", pump),
        ("  the buffer's puts in them (put_available)", put),
        ("  the receiver's own (pumps less puts)", pump - put),
        ("the buffer's draws (get_batch), beyond alone's", draws_o - draws_a),
        ("the rest of the difference with alone", rest),
    ):
        rows.append(
            {
                "case": f"{label}: {part} (baseline: a step alone)",
                "ours": round(value, 1),
                "baseline": round(alone, 1),
                "unit": "us/step",
                "ratio": round(1 - value / alone, 3),
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
    pinned = len(cores) >= 2
    out = tempfile.mkdtemp(prefix="mt-ingest-split-")
    runs: dict[str, list[dict[str, float]]] = {"alone": [], "ours": []}
    if pinned:
        bench.pin_process({cores[0]})
    try:
        samples = [{"u": u} for u in bench.distinct_fields(bench.KB, overhead.N_SAMPLES)]
        bench.run_training(  # warm-up
            overhead.Prefilled(samples), 50, out, 0, bench.streamed_sample, overhead.N_SAMPLES
        )
        for r in range(rounds):
            runs["alone"].append(one_run(False, steps, out, r, None))
            runs["ours"].append(one_run(True, steps, out, r, cores[1] if pinned else None))
    finally:
        if pinned:
            bench.pin_process(set(cores))
        shutil.rmtree(out, ignore_errors=True)
    rows = rows_of(runs)
    where = "pinned" if pinned else "NOT pinned (fewer than 2 cores)"
    finish(rows, f"medians of {rounds} interleaved rounds, {where}", 96, as_json=opts.json)


if __name__ == "__main__":
    main()
