"""Features at ingest against features at each draw: the trainer's CPU time per step.

Workload: the heat example's training (examples/heat_pde/train.py): its MLP (6 inputs
-> `--hidden` -> 32x32 field), batch 32, Adam, one torch thread; a reservoir of 4000
samples with the example's rate limit (each sample drawn about 8 times:
``sample_to_insert_ratio=8``) and watermark 500, stored by column. The samples are the
stream's (a 32x32 float32 temperature field, 5 float64 parameters, ``time_step``,
``simulation_id``), synthetic, put as a receiver puts them: blocks of 20 (one BATCH),
by a source in the training thread, each transformed once before it is put
(`Source.set_ingest_transform`), so the transform's cost is in the measured time.

- baseline ("per draw"): ``process_batch=make_process_batch(100)``, the example's mapping
  from the raw fields, run on every batch drawn (what it trained with before issue 42);
- ours ("at ingest"): ``ingest_block=make_ingest_block(100)`` (the same features, bit for
  bit, computed once per sample as it enters the buffer) and
  ``process_batch=gather_batch`` (the batch's two stored fields as tensors).

Each round trains both, alternating (A B A B ...), `--steps` steps each; the CPU time of
the process (`time.process_time`, steadier than wall time on a busy machine) from the end
of step `--warm` to the end of the loop, divided by the steps, is a round's figure; rows
give the medians over `--rounds`, in microseconds per step, ratio = per draw / at ingest
(higher is better; target 1.0: computing features once never costs more). The row
"tiny MLP" runs the same with `--hidden 16`, where the model costs little and the data
path is most of a step.

    python benchmarks/ingest_features.py                 # 5 rounds of 400 steps, ~2 minutes
    python benchmarks/ingest_features.py --quick         # a few seconds
    python benchmarks/ingest_features.py --json          # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from report import add_flags, print_json

from melissa_trainer import Buffer, Hook, OnlineTrainer, SampleBlock, Source, TrainingArguments
from melissa_trainer.sources.ingest_transform import IngestTransform

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "heat_pde" / "train.py"
TIME_STEPS, GRID, BLOCK, BATCH = 100, 32, 20, 32
RATIO, CAPACITY, WATERMARK = 8.0, 4000, 500
TARGET = 1.0


def load_example() -> ModuleType:
    """examples/heat_pde/train.py as a module (it puts examples/ on sys.path itself)."""
    spec = importlib.util.spec_from_file_location("heat_pde_train", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def raw_blocks(n_samples: int, parameters: int, seed: int = 0) -> list[SampleBlock]:
    """`n_samples` samples shaped as the stream delivers the heat example's, in blocks of
    `BLOCK` (one simulation's consecutive steps each), synthetic (a solver is not what
    is measured)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for b in range(-(-n_samples // BLOCK)):
        sim, first = divmod(b * BLOCK, TIME_STEPS)
        blocks.append(
            SampleBlock(
                {
                    "temperature": rng.uniform(280, 380, (BLOCK, GRID, GRID)).astype(np.float32),
                    "simulation_id": np.full(BLOCK, sim, np.int64),
                    "time_step": np.arange(first, first + BLOCK, dtype=np.int64),
                    "parameters": np.repeat(rng.uniform(280, 380, (1, parameters)), BLOCK, 0),
                }
            )
        )
    return blocks


class Blocks(Source):
    """Puts `blocks` as a receiver's pump does: in the training thread, before each read,
    as much as the buffer takes (its rate limiter has the last word), each block
    transformed once (what does not fit waits transformed); closes the buffer at the end."""

    puts_blocks = True

    def __init__(self, blocks: list[SampleBlock]) -> None:
        self._blocks: Iterator[SampleBlock] = iter(blocks)
        self._buffer: Buffer | None = None
        self._held: SampleBlock | None = None
        self._transform: IngestTransform | None = None

    def set_ingest_transform(self, transform: IngestTransform) -> None:
        self._transform = transform

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self._buffer = buffer

    def wait_for(self, n_samples: int, timeout: float) -> None:
        buffer = self._buffer
        assert buffer is not None
        while not buffer.closed:
            if self._held is None:
                raw = next(self._blocks, None)
                if raw is None:
                    buffer.close()
                    return
                t = self._transform
                self._held = raw if t is None else t.block(raw)
            n = buffer.put_available(self._held)
            if n < len(self._held):
                self._held = self._held[n:] if n else self._held
                return
            self._held = None

    def stop(self) -> None:
        pass


class CpuClock(Hook):
    """CPU seconds of the process from the end of step `warm` to the end of the loop."""

    def __init__(self, warm: int) -> None:
        self.warm, self.start, self.seconds, self.steps = warm, 0.0, 0.0, 0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.warm:
            self.start, self.from_step = time.process_time(), state.global_step

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.seconds = time.process_time() - self.start
        self.steps = state.global_step - self.from_step


def run(heat: ModuleType, at_ingest: bool, hidden: int, steps: int, warm: int, seed: int) -> float:
    """One arm's CPU microseconds per step."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    n_samples = WATERMARK + int(steps * BATCH / RATIO) + 2 * CAPACITY // 10
    blocks = raw_blocks(n_samples, len(heat.PARAMETER_NAMES), seed)
    with tempfile.TemporaryDirectory(prefix="ingest_features_") as out:
        args = TrainingArguments(
            output_dir=out,
            batch_size=BATCH,
            buffer="reservoir",
            buffer_size=CAPACITY,
            watermark=WATERMARK,
            sample_to_insert_ratio=RATIO,
            max_steps=steps,
            save_at_end=False,
            logging_steps=200,
            report_to="none",
            disable_progress_bar=True,
            seed=seed,
        )
        model = heat.make_model(GRID, hidden)
        clock = CpuClock(warm)
        mapping: dict[str, Any] = (
            {"ingest_block": heat.make_ingest_block(TIME_STEPS), "process_batch": heat.gather_batch}
            if at_ingest
            else {"process_batch": heat.make_process_batch(TIME_STEPS)}
        )
        trainer = OnlineTrainer(
            model,
            args,
            torch.optim.Adam(model.parameters(), lr=1e-3),
            train_source=Blocks(blocks),
            hooks=[clock],
            **mapping,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # keep the log lines out of the table
            trainer.train()
    if clock.steps <= 0:
        raise RuntimeError(f"the run stopped before step {warm}: raise --steps")
    return 1e6 * clock.seconds / clock.steps


def measure(hidden: int, rounds: int, steps: int, warm: int) -> dict[str, Any]:
    """The row for an MLP of width `hidden`: medians of interleaved rounds."""
    heat = load_example()
    ours, baseline = [], []
    for r in range(rounds):
        # alternate which arm goes first, so that neither always runs on a warmer cache
        order = (True, False) if r % 2 else (False, True)
        for at_ingest in order:
            us = run(heat, at_ingest, hidden, steps, warm, seed=r)
            (ours if at_ingest else baseline).append(us)
    o, b = statistics.median(ours), statistics.median(baseline)
    return {
        "case": f"heat example step, features at ingest vs per draw (MLP hidden {hidden}, "
        f"batch {BATCH}, each sample drawn ~{RATIO:g}x): CPU time per step",
        "ours": round(o, 1),
        "baseline": round(b, 1),
        "unit": "us",
        "ratio": round(b / o, 3),
        "target": TARGET,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warm", type=int, default=50, help="steps not timed (first)")
    parser.add_argument("--hidden", type=int, default=256, help="the heat MLP's width")
    add_flags(parser, quick="60 steps a round, 2 rounds")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.steps, opts.warm = 60, 20
        opts.rounds = min(opts.rounds, 2)
    torch.set_num_threads(1)
    rows = [measure(h, opts.rounds, opts.steps, opts.warm) for h in (opts.hidden, 16)]
    rows[1]["case"] = rows[1]["case"].replace("(MLP hidden 16", "(tiny MLP: hidden 16")
    if opts.json:
        print_json(rows)
        return
    for row in rows:
        print(
            f"{row['case']}\n  at ingest {row['ours']:.1f} us, per draw {row['baseline']:.1f} "
            f"us: {row['ratio']:.3f}x (target >= {row['target']})"
        )


if __name__ == "__main__":
    main()
