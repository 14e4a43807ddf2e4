"""Resharding a buffer checkpoint from k ranks to m, against loading it on k ranks.

Writes k reservoir snapshots (``buffer.safetensors`` + ``buffer.json``, as a checkpoint's
``rank_r/`` holds them) of ``--mb`` MB in all, samples of ``--dim`` float32 with a
stream's ``simulation_id``, ``time_step`` and ``parameters``, drawn a few times, and
each rank's pending batches. Then, interleaved (A B A B):

* baseline: each old rank loads its own snapshot (`Buffer.load`: what a resume on k
  ranks does); the time of the slowest rank (the ranks load in parallel).
* ours: each new rank of m reads every old rank's snapshot (`read_snapshot`: arrays read
  when asked for) and pending batches, computes its share (`share`) and loads it
  (`Buffer.load_state_dict`); the time of the slowest new rank.

The files are read from the page cache (written just before): the figures are the CPU
cost of the two paths, not the disk's. Prints one JSON line: the medians, their ratio
(ours / baseline; the issue's target: at most 1.5 for 1 GB from 2 to 3 ranks).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from melissa_trainer.buffers import ReservoirBuffer, read_snapshot
from melissa_trainer.buffers.reshard import share
from melissa_trainer.dataset import StreamDataset, read_pending
from melissa_trainer.json_output import to_json


def write_checkpoint(root: Path, k: int, per_rank: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    for r in range(k):
        buf = ReservoirBuffer(per_rank, 1, seed=r)
        for i in range(per_rank):
            buf.put({
                "u": rng.standard_normal(dim).astype(np.float32),
                "simulation_id": np.array(i // 100, np.int64),
                "time_step": np.array(k * (i % 100) + r, np.int64),
                "parameters": np.array([0.5, 1.5]),
            })  # fmt: skip
        for _ in range(per_rank // 64):
            buf.get_batch(64)
        dataset = StreamDataset(buf, 64, process_sample=lambda s: s)
        dataset.prefetch(4)  # the prefetch window: pending batches in the checkpoint
        buf.save(root / f"rank_{r}")
        dataset.save(root / f"rank_{r}")


def baseline(root: Path, k: int, per_rank: int) -> float:
    slowest = 0.0
    for r in range(k):
        start = time.perf_counter()
        ReservoirBuffer(per_rank, 1).load(root / f"rank_{r}")
        slowest = max(slowest, time.perf_counter() - start)
    return slowest


def resharded(root: Path, k: int, m: int, capacity: int) -> float:
    slowest = 0.0
    for j in range(m):
        start = time.perf_counter()
        snaps = [read_snapshot(root / f"rank_{r}") for r in range(k)]
        pending = [read_pending(root / f"rank_{r}") for r in range(k)]
        arrays, meta = share(snaps, pending, j, m)
        ReservoirBuffer(capacity, 1).load_state_dict(arrays, meta)
        slowest = max(slowest, time.perf_counter() - start)
    return slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1024, help="MB of samples in all")
    parser.add_argument("--dim", type=int, default=4096, help="float32 per sample")
    parser.add_argument("--old", type=int, default=2, help="k: old ranks")
    parser.add_argument("--new", type=int, default=3, help="m: new ranks")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    opts = parser.parse_args()
    k, m = opts.old, opts.new
    per_rank = max(1, int(opts.mb * 1e6 / (4 * opts.dim) / k))
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        root = Path(tmp)
        write_checkpoint(root, k, per_rank, opts.dim)
        capacity = per_rank  # the same buffer_size: 2 -> 3 ranks leaves room
        ours, base = [], []
        for _ in range(opts.rounds):
            base.append(baseline(root, k, per_rank))
            ours.append(resharded(root, k, m, capacity))
        size = sum(p.stat().st_size for p in root.rglob("*.safetensors"))
    b, o = statistics.median(base), statistics.median(ours)
    print(to_json({
        "case": f"buffer checkpoint of {size / 1e6:.0f} MB: {k} -> {m} ranks (slowest rank)",
        "ours_s": round(o, 3), "baseline_s": round(b, 3), "ratio": round(o / b, 3),
        "target": 1.5, "rounds": opts.rounds, "samples": per_rank * k,
        "ours_all_s": [round(x, 3) for x in ours], "baseline_all_s": [round(x, 3) for x in base],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
