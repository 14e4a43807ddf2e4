"""The cost of the reservoir's draw and eviction choices, per read and per put.

`ReservoirBuffer(draw_choices=d)` draws the least-drawn of `d` random held samples;
`evict_choices=e` evicts the most-drawn of `e` random drawn ones (`heat_equal_steps.py`
measures what they do to training). Here, what they cost: the columnar reservoir
`OnlineTrainer` builds for blocks (`ColumnarReservoirBuffer`), full of 10,000 heat
samples (`columnar.py`'s: a 32 x 32 float32 field, ``time_step``, ``simulation_id``,
six parameters), with the choices given (ours) against uniform draws and evictions
(the baseline, ``1/1``), in CPU seconds, interleaved (A B A B ...), medians:

* block read: ``get_block(32)``, the trainer's batch (the draws and one gather per
  field; a choice adds ``d - 1`` uniforms and draw-count looks per drawn sample);
* block put: a receiver's 100-sample `SampleBlock` into the full reservoir, with a
  ``get_block(32)`` between puts so that drawn samples can be evicted, per sample put
  (``e - 1`` uniforms and looks more per eviction).

Target 0.97 (a choice that costs nothing measurable on this machine's noise).

    python benchmarks/reservoir_choices.py [--choices 2/1] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import columnar as col  # noqa: E402
from heat_equal_steps import parse_policies  # noqa: E402
from report import add_flags, print_json  # noqa: E402

from melissa_trainer.buffers import ColumnarReservoirBuffer, SampleBlock  # noqa: E402

Choices = tuple[int, int]


def filled(choices: Choices, blocks: list[SampleBlock]) -> ColumnarReservoirBuffer:
    buffer = ColumnarReservoirBuffer(
        col.CAPACITY, 1000, seed=0, draw_choices=choices[0], evict_choices=choices[1]
    )
    for block in blocks[: col.CAPACITY // col.BLOCK]:
        assert buffer.put_available(block) == col.BLOCK
    return buffer


def interleaved(rounds: int, ours: Choices, fn: Callable[[Choices], float]) -> tuple[float, float]:
    """Medians of `fn(ours)` and `fn((1, 1))`, alternating which goes first."""
    a: list[float] = []
    b: list[float] = []
    for r in range(rounds):
        order = (ours, (1, 1)) if r % 2 == 0 else ((1, 1), ours)
        for choices in order:
            (a if choices == ours else b).append(fn(choices))
    return statistics.median(a), statistics.median(b)


def row(case: str, ours_s: float, base_s: float) -> dict:
    """Times in microseconds; the ratio is baseline / ours (higher is better)."""
    return {"case": case, "ours": round(ours_s * 1e6, 3), "baseline": round(base_s * 1e6, 3),
            "unit": "us", "ratio": round(base_s / ours_s, 3), "target": 0.97}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--choices", default="2/1", help="ours: DRAW/EVICT choices (>= 1)")
    add_flags(parser, quick="fewer rounds and reads")
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args(argv)
    # (the policies' syntax is heat_equal_steps.py's: one parser for both)
    policies = parse_policies(parser, opts.choices, "--choices")
    if len(policies) != 1 or policies[0] == (1, 1):
        parser.error(f"--choices {opts.choices!r}: one DRAW/EVICT, not the baseline's 1/1")
    ours = policies[0]
    rounds = opts.rounds or (3 if opts.quick else 9)
    reads = 300 if opts.quick else 3000
    samples = col.heat_samples(col.CAPACITY + (20 if opts.quick else 60) * col.BLOCK)
    blocks = [
        SampleBlock.from_samples(samples[i : i + col.BLOCK])
        for i in range(0, len(samples), col.BLOCK)
    ]
    extra = blocks[col.CAPACITY // col.BLOCK :]
    name = f"draw_choices={ours[0]}, evict_choices={ours[1]} vs 1, 1"

    def read(choices: Choices) -> float:
        return col.read_seconds(filled(choices, blocks), reads)

    def put(choices: Choices) -> float:
        return col.block_put_seconds(filled(choices, blocks), extra)

    start = time.perf_counter()
    rows = [
        row(f"get_block({col.BATCH}) of a full columnar reservoir: {name}",
            *interleaved(rounds, ours, read)),
        row(f"put of {col.BLOCK}-sample blocks into a full columnar reservoir, per sample: "
            f"{name}", *interleaved(rounds, ours, put)),
    ]  # fmt: skip
    if opts.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['case']:<90} {r['ours']:>8} us  uniform {r['baseline']:>8} us  "
                  f"{r['ratio']}x")  # fmt: skip
        print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
