"""The columnar reservoir's per-sample read path against the plain reservoir's (issue 42).

Issue 42's pinned 1 KB row trains with a `process_sample` (`benchmarks/ingest.py`), so
its trainer reads each batch as samples: the plain `ReservoirBuffer` hands out the
dicts it holds, the `ColumnarReservoirBuffer` gathers the drawn rows (one ``take`` per
field) and makes a dict of views per sample. Both reservoirs here hold 4,096 samples
put as the pinned row's receiver puts them (blocks of 63: a 1 KB ``u``,
``simulation_id``, ``time_step`` and empty ``parameters``), seeded alike (the same
draws: the script checks that both give the same batch), and are read interleaved
(A B A B ..., the order alternating by round), medians of wall microseconds:

* ``get_batch(64)``: the buffer's read alone, warm caches;
* trainer batch: `StreamDataset` ``prefetch(1)`` and ``next_batch()`` with the pinned
  row's `process_sample` (``u`` as 3 inputs and 1,024 targets) and the default collate:
  what the training thread does for a batch, the pending and the last 8 batches kept
  as the trainer keeps them, warm;
* the same with a 4 MiB write between batches, untimed (a training step's working set
  evicts the core's 2 MiB L2: what the pinned row's 4 ms steps do).

Ours is the columnar reservoir, the baseline the plain one; ratio = plain / columnar
(higher is better; below 1 the columnar path costs more). Targets None: figures to
read, and to A/B (``benchmarks/ab.py --head_scripts "sample_reads.py"``).

    python benchmarks/sample_reads.py [--quick] [--json] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from report import add_flags, print_json

from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, SampleBlock
from melissa_trainer.core.dataset import StreamDataset

CAPACITY, BLOCK, BATCH = 4096, 63, 64
#: bytes written between two batches in the cold case: above the core's L2 (2 MiB here)
EVICT_BYTES = 4 << 20


def receiver_blocks(n: int, seed: int = 0) -> list[SampleBlock]:
    """`n` blocks as the pinned row's receiver makes them (`benchmarks/columnar.py`'s)."""
    rng = np.random.default_rng(seed)
    return [
        SampleBlock(
            {
                "u": rng.random((BLOCK, 256), dtype=np.float32),
                "simulation_id": np.full(BLOCK, b % 16, np.int64),
                "time_step": np.arange(b * BLOCK, (b + 1) * BLOCK, dtype=np.int64),
                "parameters": np.zeros((BLOCK, 0), np.float64),
            }
        )
        for b in range(n)
    ]


def full(cls: type[ReservoirBuffer], blocks: list[SampleBlock]) -> ReservoirBuffer:
    """A reservoir of `cls` full of `blocks`' samples (seed 0: the same draws for both)."""
    buffer = cls(CAPACITY, 1, seed=0)
    i = 0
    while len(buffer) < CAPACITY:
        buffer.put_available(blocks[i % len(blocks)])
        i += 1
    return buffer


def process(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """The pinned row's `process_sample` (`benchmarks/ingest.py`'s, for a 1 KB field)."""
    u = torch.from_numpy(s["u"])
    return u[:3], u[:1024] if u.numel() >= 1024 else u.repeat(1024 // u.numel())


def get_batch_us(buffer: ReservoirBuffer, reads: int) -> float:
    """Wall microseconds per ``get_batch(BATCH)`` (the batch freed before the next)."""
    start = time.perf_counter()
    for _ in range(reads):
        buffer.get_batch(BATCH)
    return (time.perf_counter() - start) / reads * 1e6


def trainer_batch_us(buffer: ReservoirBuffer, reads: int, evict: np.ndarray | None) -> float:
    """Wall microseconds per batch taken and collated by a `StreamDataset` with
    `process`, a write of `evict` (untimed) between batches when given."""
    dataset = StreamDataset(buffer, BATCH, process_sample=process)
    spent = 0
    for _ in range(reads):
        if evict is not None:
            evict.fill(1)
        start = time.perf_counter_ns()
        dataset.prefetch(1)
        dataset.next_batch()
        spent += time.perf_counter_ns() - start
    return spent / reads / 1e3


def interleaved(
    rounds: int, make: Callable[[type[ReservoirBuffer]], ReservoirBuffer], fn: Callable
) -> tuple[float, float]:
    """Medians of `fn(buffer)` for the columnar and the plain reservoir, alternating
    which goes first; each round on a fresh full buffer."""
    ours: list[float] = []
    base: list[float] = []
    order = (ColumnarReservoirBuffer, ReservoirBuffer)
    for r in range(rounds):
        for cls in order if r % 2 == 0 else order[::-1]:
            (ours if cls is ColumnarReservoirBuffer else base).append(fn(make(cls)))
    return statistics.median(ours), statistics.median(base)


def row(case: str, ours_us: float, base_us: float) -> dict:
    """A row in microseconds; ratio = baseline / ours (higher is better)."""
    return {
        "case": case,
        "ours": round(ours_us, 2),
        "baseline": round(base_us, 2),
        "unit": "us",
        "ratio": round(base_us / ours_us, 3),
        "target": None,
    }


def same_batches(blocks: list[SampleBlock]) -> None:
    """The two reservoirs, seeded alike, give the trainer the same batches (bit for
    bit): else the comparison would not be of the same work."""
    got = []
    for cls in (ColumnarReservoirBuffer, ReservoirBuffer):
        dataset = StreamDataset(full(cls, blocks), BATCH, process_sample=process)
        dataset.prefetch(3)
        got.append([dataset.next_batch()[0] for _ in range(3)])
    for a, b in zip(*got, strict=True):
        if not all(torch.equal(x, y) for x, y in zip(a, b, strict=True)):
            raise SystemExit("the columnar and the plain reservoir gave different batches")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flags(parser, quick="fewer rounds and reads")
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args(argv)
    rounds = opts.rounds or (3 if opts.quick else 7)
    reads = 200 if opts.quick else 2000
    blocks = receiver_blocks(CAPACITY // BLOCK + 1)
    same_batches(blocks)
    evict = np.zeros(EVICT_BYTES, np.uint8)

    def make(cls: type[ReservoirBuffer]) -> ReservoirBuffer:
        return full(cls, blocks)

    rows = [
        row(
            f"get_batch({BATCH}) of 1 KB rows, a full reservoir of {CAPACITY}: "
            "columnar vs plain (warm)",
            *interleaved(rounds, make, lambda b: get_batch_us(b, reads)),
        ),
        row(
            f"trainer batch of {BATCH} (StreamDataset, process_sample, collate): "
            "columnar vs plain reservoir (warm)",
            *interleaved(rounds, make, lambda b: trainer_batch_us(b, reads, None)),
        ),
        row(
            f"trainer batch of {BATCH}, a {EVICT_BYTES >> 20} MiB write between batches "
            "(cold): columnar vs plain reservoir",
            *interleaved(rounds, make, lambda b: trainer_batch_us(b, reads, evict)),
        ),
    ]
    if opts.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['case']:<100} {r['ours']:>8} us  plain {r['baseline']:>8} us  {r['ratio']}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
