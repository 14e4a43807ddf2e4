"""The columnar reservoir against the plain one, on `online_vs_offline.py`'s samples.

`ColumnarReservoirBuffer` (what `OnlineTrainer` builds when batches are read as blocks)
against `ReservoirBuffer` (the baseline: the same policy, samples held as dicts), both
full of 10,000 heat samples (a 32 x 32 float32 field, ``time_step``,
``simulation_id``, six parameters), in CPU seconds, interleaved (A B A B ...), medians:

* block read: ``get_block(32)``, the trainer's batch (plain: draws, then stacks the 32
  dicts field by field; columnar: the same draws, one gather per field);
* block put: a receiver's 100-sample `SampleBlock` into the full reservoir, with a
  ``get_block(32)`` between puts so that drawn samples can be evicted (plain: the block
  split into per-sample dicts; columnar: one scatter per field), per sample put;
* sample read: ``get_batch(32)``, the trainer's batch when it has a `process_sample`
  (plain: the draws, handing out the held dicts; columnar: the same draws, one gather
  per field and a dict of views per sample: the cost the columnar store pays on a
  read, against the per-sample objects a plain put builds and an eviction frees).
  Target None: a figure to read;
* receiver put: issue 42's pinned 1 KB row's put, as its receiver makes it: blocks of
  63 samples (a 64 KiB BATCH of 1 KB rows, with the receiver's ``simulation_id``,
  ``time_step`` and empty ``parameters``) into a full reservoir of 4,096, a
  ``get_block(64)`` between puts (the trainer's draw), in CPU microseconds per block
  (the put's lock is held for about all of it). Target None: a figure to read (the
  plain reservoir splits the block into per-sample dicts);
* single put: ``put`` of one sample at a time into an empty buffer until full (an
  `IterableSource`'s path; plain: stores a reference; columnar: copies into the row;
  the cost the columnar store pays). Target None: a figure to read.
* heat batch: the heat example's whole host path to a batch (`examples/heat_pde`):
  columnar ``get_block(32)`` and its `make_process_batch` (what it trains with) against
  the plain reservoir's ``get_batch(32)``, 32 calls of `make_process_sample` and the
  trainer's collate (what it trained with before); the same batch, bit for bit.

    python benchmarks/columnar.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from report import add_flags, print_json

from melissa_trainer.buffers import (
    Buffer,
    ColumnarReservoirBuffer,
    ReservoirBuffer,
    SampleBlock,
)
from melissa_trainer.core.dataset import fast_collate

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

CAPACITY = 10_000
BATCH = 32
BLOCK = 100


def heat_samples(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """`n` samples shaped like the heat example's (100 steps per simulation)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append({
            "temperature": rng.uniform(300.0, 400.0, (32, 32)).astype(np.float32),
            "simulation_id": np.array(i // 100, np.int64),
            "time_step": np.array(i % 100, np.int64),
            "parameters": rng.uniform(0.0, 1.0, 6),
        })  # fmt: skip
    return out


def filled(cls: type[ReservoirBuffer], blocks: list[SampleBlock]) -> Buffer:
    buffer = cls(CAPACITY, 1000, seed=0)
    for block in blocks[: CAPACITY // BLOCK]:
        assert buffer.put_available(block) == BLOCK
    return buffer


def read_seconds(buffer: Buffer, reads: int) -> float:
    """CPU seconds per `get_block(BATCH)`."""
    start = time.process_time()
    for _ in range(reads):
        buffer.get_block(BATCH)
    return (time.process_time() - start) / reads


def sample_read_seconds(buffer: Buffer, reads: int) -> float:
    """CPU seconds per `get_batch(BATCH)`."""
    start = time.process_time()
    for _ in range(reads):
        buffer.get_batch(BATCH)
    return (time.process_time() - start) / reads


def block_put_seconds(buffer: Buffer, blocks: list[SampleBlock]) -> float:
    """CPU seconds per sample put by blocks into the full `buffer` (reads between)."""
    spent, put = 0.0, 0
    for block in blocks:
        start = time.process_time()
        put += buffer.put_available(block)
        spent += time.process_time() - start
        buffer.get_block(BATCH)
    return spent / max(put, 1)


RECEIVER_CAPACITY, RECEIVER_BLOCK, RECEIVER_DRAW = 4096, 63, 64


def receiver_blocks(n: int, seed: int = 0) -> list[SampleBlock]:
    """`n` blocks as the pinned row's receiver makes them (1 KB rows and three fields)."""
    rng = np.random.default_rng(seed)
    k = RECEIVER_BLOCK
    return [
        SampleBlock(
            {
                "u": rng.random((k, 256), dtype=np.float32),
                "simulation_id": np.full(k, b % 16, np.int64),
                "time_step": np.arange(b * k, (b + 1) * k, dtype=np.int64),
                "parameters": np.zeros((k, 0), np.float64),
            }
        )  # fmt: skip
        for b in range(n)
    ]


def receiver_put_seconds(cls: type[ReservoirBuffer], blocks: list[SampleBlock], puts: int) -> float:
    """CPU seconds per block put into the full reservoir, a draw between puts."""
    buffer = cls(RECEIVER_CAPACITY, 1, seed=0)
    i = 0
    while len(buffer) < RECEIVER_CAPACITY:
        buffer.put_available(blocks[i % len(blocks)])
        i += 1
    spent = 0.0
    for i in range(puts):
        buffer.get_block(RECEIVER_DRAW)
        start = time.process_time()
        buffer.put_available(blocks[i % len(blocks)])
        spent += time.process_time() - start
    return spent / puts


def single_put_seconds(cls: type[ReservoirBuffer], samples: list[dict[str, np.ndarray]]) -> float:
    """CPU seconds per `put` of one sample into a buffer with room."""
    buffer = cls(CAPACITY, 1000, seed=0)
    start = time.process_time()
    for sample in samples:
        buffer.put(sample)
    return (time.process_time() - start) / len(samples)


def heat_batch_seconds(
    buffer: Buffer, heat: object, reads: int, parameters: int
) -> tuple[float, torch.Tensor]:
    """CPU seconds per heat batch read and mapped (columnar: block and `process_batch`;
    plain: samples, `process_sample` each, collate), and the last batch's inputs."""
    columnar = isinstance(buffer, ColumnarReservoirBuffer)
    one = heat.make_process_sample(100)  # type: ignore[attr-defined]
    whole = heat.make_process_batch(100)  # type: ignore[attr-defined]

    def trim(fields: dict) -> dict:  # the heat example's parameter count
        return {**fields, "parameters": fields["parameters"][..., :parameters]}

    start = time.process_time()
    for _ in range(reads):
        if columnar:
            block = buffer.get_block(BATCH)
            batch = whole(SampleBlock(trim(dict(block.fields))))
        else:
            batch = fast_collate([one(trim(s)) for s in buffer.get_batch(BATCH)])
    return (time.process_time() - start) / reads, batch[0]


def interleaved(rounds: int, fn: Callable[[type[ReservoirBuffer]], float]) -> tuple[float, float]:
    """Medians of `fn(columnar)` and `fn(plain)`, alternating which goes first."""
    ours: list[float] = []
    base: list[float] = []
    for r in range(rounds):
        order = (ColumnarReservoirBuffer, ReservoirBuffer)
        for cls in order if r % 2 == 0 else order[::-1]:
            (ours if cls is ColumnarReservoirBuffer else base).append(fn(cls))
    return statistics.median(ours), statistics.median(base)


def row(case: str, ours_s: float, base_s: float, target: float | None) -> dict:
    """Times in microseconds; the ratio is baseline / ours (higher is better)."""
    return {
        "case": case,
        "ours": round(ours_s * 1e6, 2),
        "baseline": round(base_s * 1e6, 2),
        "unit": "us",
        "ratio": round(base_s / ours_s, 3),
        "target": target,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flags(parser, quick="fewer rounds and reads")
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args(argv)
    rounds = opts.rounds or (3 if opts.quick else 7)
    reads = 300 if opts.quick else 3000
    samples = heat_samples(CAPACITY + (20 if opts.quick else 60) * BLOCK)
    blocks = [
        SampleBlock.from_samples(samples[i : i + BLOCK]) for i in range(0, len(samples), BLOCK)
    ]
    extra = blocks[CAPACITY // BLOCK :]
    receiver = receiver_blocks(100)
    rows = [
        row(
            f"get_block({BATCH}) of a full reservoir: columnar vs plain",
            *interleaved(rounds, lambda cls: read_seconds(filled(cls, blocks), reads)),
            1.0,
        ),
        row(
            f"put of {BLOCK}-sample blocks into a full reservoir, per sample",
            *interleaved(rounds, lambda cls: block_put_seconds(filled(cls, blocks), extra)),
            1.0,
        ),
        row(
            f"get_batch({BATCH}) of a full reservoir (a reader of samples)",
            *interleaved(rounds, lambda cls: sample_read_seconds(filled(cls, blocks), reads)),
            None,
        ),
        row(
            f"receiver put: {RECEIVER_BLOCK} x 1 KB rows into a full reservoir of "
            f"{RECEIVER_CAPACITY}, a get_block({RECEIVER_DRAW}) between, per block",
            *interleaved(rounds, lambda cls: receiver_put_seconds(cls, receiver, reads)),
            None,
        ),
        row(
            "single-sample put into an empty reservoir, per sample",
            *interleaved(rounds, lambda cls: single_put_seconds(cls, samples[:CAPACITY])),
            None,
        ),
    ]
    sys.path.insert(0, str(EXAMPLES))
    heat = importlib.import_module("heat_pde.train")
    width = len(heat.PARAMETER_NAMES)
    firsts: dict[bool, torch.Tensor] = {}

    def heat_path(cls: type[ReservoirBuffer]) -> float:
        seconds, inputs = heat_batch_seconds(filled(cls, blocks), heat, reads // 3, width)
        firsts.setdefault(cls is ColumnarReservoirBuffer, inputs)
        return seconds

    rows.append(row(
        f"heat example's batch of {BATCH} read and mapped on the host: "
        "columnar + process_batch vs plain + process_sample + collate",
        *interleaved(rounds, heat_path),
        1.0,
    ))  # fmt: skip
    # same seed, same draws: the first round's last batch must be the same bits
    if not torch.equal(firsts[True], firsts[False]):
        raise SystemExit("heat batch: the two paths gave different batches")
    if opts.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['case']:<66} {r['ours']:>8} us  plain {r['baseline']:>8} us  {r['ratio']}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
