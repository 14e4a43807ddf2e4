"""Resharding a checkpoint's buffers: 2 ranks' buffers loaded on 3 ranks, against the
same checkpoint loaded on 2 ranks.

**What is measured: the buffer part of a resume**, the one that grows with the data
(the model, optimizer and trainer state are global parts, read the same way on any
number of ranks). The checkpoint's per-rank files (``rank_R/buffer.*`` and
``rank_R/pending.*``) are written by the library's own `Buffer.save` and
`StreamDataset.save` from 2 full reservoir buffers holding ``--mb`` (1024) MB in all:
samples of a 1024-float32 field (the heat example's 32x32 grid) with 5 parameters, a
simulation id and a time step; a quarter of them drawn; two pending batches of 32 per
rank, as in a checkpoint taken inside a stop-sync window. Then each rank of the run
that resumes loads its buffer, in a fresh process (one per simulated rank, forked from
a server that imported the library once: `isolated.py`):

* baseline, on 2 ranks: what `checkpoint.registry` runs on the same number of ranks,
  `Buffer.load` then `StreamDataset.load` of the rank's own directory;
* ours, on 3 ranks: what `checkpoint.reshard.Reshard` runs for the buffer and pending
  parts on another number of ranks: `read_snapshot` and `read_pending` of every old
  rank, `buffers.reshard.share`, `Buffer.load_state_dict`, and the dataset's
  `clear_pending`.

Timed inside the rank's process from before its first read to its loaded buffer
(interpreter start-up, imports and the empty buffer's construction not included). The
simulated ranks run one after another: on a cluster the ranks load at once, each on
its own node, and a resume waits for the slowest, so the figure of a round is its
slowest rank's time (running 3 processes at once on this 2-core machine would measure
the machine). The files are in the page cache (written just before, read every
round): the cost of a cold parallel file system (where a new rank of ours reads its
share, about 1/m of the samples, from every old rank's file) does not show. Rounds
alternate baseline and ours (A B A B ...), ``--rounds`` of each; medians. Each round
checks that the ranks loaded every sample (held counts summed over the ranks).

Rows: the slowest rank (ratio baseline / ours, higher is better, target >= 1/1.5), and
the sum over the ranks (the work done, no target).

    python benchmarks/reshard.py            # 1 GB, 5 rounds of each: about 10 minutes
    python benchmarks/reshard.py --quick    # 16 MB, 1 round: seconds
    python benchmarks/reshard.py --json     # {"rows": [...], "setup": {...}}
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from isolated import run_isolated  # noqa: E402
from report import WORK_DIR_HELP, add_flags, print_json, print_rows, work_dir  # noqa: E402

from melissa_trainer.buffers import ReservoirBuffer, read_snapshot  # noqa: E402
from melissa_trainer.buffers.reshard import share  # noqa: E402
from melissa_trainer.core.dataset import StreamDataset  # noqa: E402
from melissa_trainer.core.pending_file import read_pending

OLD, NEW = 2, 3  # ranks that wrote the checkpoint, ranks of the resumed run
FIELD = 1024  # float32 per sample (32x32)
BATCH = 32
TARGET = round(1 / 1.5, 3)
#: what the ranks' processes import, once, in the fork server (`isolated.py`): each
#: fresh interpreter spent seconds importing torch (through `dataset`) before its load
PRELOAD = ("numpy", "melissa_trainer.buffers", "melissa_trainer.buffers.reshard",
           "melissa_trainer.core.dataset", "melissa_trainer.common.json_output",
           "report")  # fmt: skip


def sample_bytes() -> int:
    return 4 * FIELD + 4 * 5 + 8 + 8


def write_checkpoint(root: Path, capacity: int) -> int:
    """Each old rank's buffer and pending files under ``root/rank_R``; returns the
    samples held in all (pending ones counted where the buffer holds them too)."""
    held = 0
    for rank in range(OLD):
        rng = np.random.default_rng(rank)
        fields = rng.standard_normal((capacity, FIELD), dtype=np.float32)
        parameters = rng.uniform(size=(capacity, 5)).astype(np.float32)
        buffer = ReservoirBuffer(capacity, watermark=1, seed=rank)
        samples = [
            {
                "field": fields[i],
                "parameters": parameters[i],
                "simulation_id": np.asarray(rank * capacity + i, np.int64),
                "time_step": np.asarray(i % 100, np.int64),
            }
            for i in range(capacity)
        ]
        for start in range(0, capacity, 4096):
            assert buffer.put_available(samples[start : start + 4096]) == len(
                samples[start : start + 4096]
            )
        for _ in range(capacity // 4 // BATCH):  # draws: the reservoir's draw counts
            buffer.get_batch(BATCH)
        dataset = StreamDataset(buffer, BATCH)
        dataset.prefetch(2)  # pending batches, taken and untrained
        directory = root / f"rank_{rank}"
        buffer.save(directory)
        dataset.save(directory)
        held += buffer.stats().size
        del fields, samples, buffer, dataset
    return held


def load_rank(root: Path, world: int, rank: int, capacity: int) -> dict[str, Any]:
    """One simulated rank's load (see the module docstring); runs in a process of its
    own (`one_round`), whose start and imports are not timed."""
    buffer = ReservoirBuffer(capacity, watermark=1, seed=rank)
    dataset = StreamDataset(buffer, BATCH)
    start = time.perf_counter()
    if world == OLD:  # the same number of ranks: the rank's own files
        buffer.load(root / f"rank_{rank}")
        dataset.load(root / f"rank_{rank}")
    else:
        snapshots = [read_snapshot(root / f"rank_{r}") for r in range(OLD)]
        pending = [read_pending(root / f"rank_{r}") for r in range(OLD)]
        arrays, meta = share(snapshots, pending, rank, world)
        del snapshots, pending
        buffer.load_state_dict(arrays, meta)
        dataset.clear_pending()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "held": buffer.stats().size}


def one_round(root: Path, world: int, capacity: int, expected: int) -> tuple[float, float]:
    """(slowest rank, sum over ranks) of the load of `world` ranks, in seconds; checks
    that they hold the `expected` samples in all."""
    times, held = [], 0
    for rank in range(world):
        log = root / "logs" / f"load-{world}-{rank}.log"  # outside the ranks' directories
        try:
            result = run_isolated(load_rank, root, world, rank, capacity, log=log,
                                  preload=PRELOAD)  # fmt: skip
        except RuntimeError as exc:
            raise SystemExit(f"rank {rank} of {world} failed:\n{exc}") from None
        times.append(float(result["seconds"]))
        held += int(result["held"])
    if held != expected:
        raise SystemExit(f"{world} ranks hold {held} samples, the checkpoint {expected}")
    return max(times), sum(times)


def row(case: str, ours: float, baseline: float, target: float | None) -> dict[str, Any]:
    return {"case": case, "ours": round(ours, 4), "baseline": round(baseline, 4),
            "unit": "s", "ratio": round(baseline / ours, 4), "target": target}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="16 MB, 1 round (a smoke test)")
    parser.add_argument("--mb", type=int, default=None, help="the buffers' size in all (1024)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each (5)")
    parser.add_argument("--dir", type=work_dir, default=None, help=WORK_DIR_HELP)
    opts = parser.parse_args()
    mb = opts.mb or (16 if opts.quick else 1024)
    rounds = opts.rounds or (1 if opts.quick else 5)
    capacity = mb * 2**20 // OLD // sample_bytes()
    with tempfile.TemporaryDirectory(prefix="mt-reshard-", dir=opts.dir) as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        expected = write_checkpoint(root, capacity)
        written = time.perf_counter() - started
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        runs: dict[int, list[tuple[float, float]]] = {OLD: [], NEW: []}
        for _ in range(rounds):  # A B A B
            for world in (OLD, NEW):
                runs[world].append(one_round(root, world, capacity, expected))
    slowest = {w: statistics.median(t for t, _ in r) for w, r in runs.items()}
    total = {w: statistics.median(s for _, s in r) for w, r in runs.items()}
    mb_written = size / 2**20
    rows = [
        row(f"load {mb_written:.0f} MB of buffers written by {OLD} ranks on {NEW} ranks, "
            f"slowest rank / on {OLD} ranks", slowest[NEW], slowest[OLD], TARGET),
        row(f"the same, summed over the ranks ({NEW} / {OLD})", total[NEW], total[OLD],
            None),
    ]  # fmt: skip
    setup = {
        "checkpoint_mb": round(mb_written, 1),
        "samples_per_old_rank": capacity,
        "rounds": rounds,
        "write_s": round(written, 2),
        "slowest_s": {str(w): [round(t, 4) for t, _ in r] for w, r in runs.items()},
        "sum_s": {str(w): [round(s, 4) for _, s in r] for w, r in runs.items()},
    }
    if opts.json:
        print_json(rows, setup=setup)
        return
    print(
        f"\n{mb_written:.0f} MB checkpoint (2 reservoirs of {capacity} samples of "
        f"{FIELD} float32), {rounds} rounds of each, interleaved; medians"
    )
    print_rows(rows, "Reshard load (ratio: baseline / ours, higher is better)", width=78)


if __name__ == "__main__":
    main()
