"""What `SampleLedger` costs a training step: is it cheap enough to leave on?

Two measures, each row with its baseline from the same run:

* ``trainer_b{B}``: an in-process trainer (an MLP of width 256 on 64 inputs, fifo
  buffer, batch B) run `--rounds` times without and with the ledger, interleaved
  (A B, then B A, ...); each run's median step time, then the median over runs.
  ``ratio`` = without / with (1: free). The step time is the training thread's CPU
  time between `on_step_end`s (`time.thread_time`, torch on one thread): on a shared
  machine, wall time measures the other processes more than the hook.
* ``hook_b{B}_{block|samples}``: the hook's own work per step (`on_batch_ready` on a
  batch of B samples as a block or as per-sample dicts, then `on_step_end`'s write),
  median of `--calls` calls; ``ratio`` = that over the trainer's median step without
  the ledger (the fraction of a step it takes).

    python benchmarks/lineage_cost.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.buffers.block import SampleBlock
from melissa_trainer.hooks import SampleLedger


class StepClock(Hook):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.times.append(time.thread_time())


def samples(n: int, width: int = 64) -> Any:
    rng = np.random.default_rng(0)
    for i in range(n):
        yield {"x": rng.standard_normal(width).astype(np.float32),
               "simulation_id": np.array(i % 50), "time_step": np.array(i // 50)}  # fmt: skip


def median_step(folder: Path, batch: int, steps: int, ledger: bool) -> float:
    """One run's median step time (s)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.SiLU(), torch.nn.Linear(256, 64))
    clock = StepClock()
    args = TrainingArguments(
        output_dir=str(folder), batch_size=batch, buffer="fifo", buffer_size=4 * batch,
        report_to="none", disable_progress_bar=True, save_at_end=False,
        simulation_loss_steps=0, logging_steps=10**9, save_seconds=None,
    )  # fmt: skip
    hooks: list[Hook] = [clock, SampleLedger(folder / "lineage")] if ledger else [clock]
    OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=samples(batch * steps),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"])),
        hooks=hooks,
    ).train()  # fmt: skip
    gaps = np.diff(clock.times[5:])  # (the first steps: warm-up)
    return float(np.median(gaps))


def hook_cost(folder: Path, batch: int, block: bool, calls: int) -> float:
    """The hook's work per step (s): one batch's record and its write."""
    rows = list(samples(batch))
    batch_samples: Any = SampleBlock.from_samples(rows) if block else rows
    trainer = SimpleNamespace(
        args=SimpleNamespace(output_dir=str(folder), buffer="fifo"), process_index=0,
        num_processes=1, run_id="bench", dataset=SimpleNamespace(last_samples=batch_samples),
    )  # fmt: skip
    state = SimpleNamespace(global_step=0, pseudo_epoch=0)
    hook = SampleLedger(folder / f"hook-{batch}-{block}")
    hook.on_train_start(trainer, state, None)  # type: ignore[arg-type]
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        hook.on_batch_ready(trainer, state, None, None)  # type: ignore[arg-type]
        hook.on_step_end(trainer, state, None)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
    hook.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    parser.add_argument("--json", action="store_true", help='last line: {"rows": [...]}')
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args()
    torch.set_num_threads(1)  # (all the step's compute on the thread the clock reads)
    rounds = opts.rounds or (3 if opts.quick else 7)
    steps, calls = (150, 300) if opts.quick else (400, 2000)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (16, 256):
            runs: dict[bool, list[float]] = {False: [], True: []}
            for r in range(rounds):
                for ledger in (False, True) if r % 2 == 0 else (True, False):
                    out = Path(tmp) / f"t{batch}-{r}-{ledger}"
                    runs[ledger].append(median_step(out, batch, steps, ledger))
            without, with_ = statistics.median(runs[False]), statistics.median(runs[True])
            rows.append(
                {
                    "case": f"trainer_b{batch}",
                    "step_us_without": without * 1e6,
                    "step_us_with": with_ * 1e6,
                    "overhead_us": (with_ - without) * 1e6,
                    "ratio": without / with_,
                    "runs_without_us": [x * 1e6 for x in runs[False]],
                    "runs_with_us": [x * 1e6 for x in runs[True]],
                }
            )
            for block in (True, False):
                cost = hook_cost(Path(tmp), batch, block, calls)
                kind = "block" if block else "samples"
                rows.append(
                    {
                        "case": f"hook_b{batch}_{kind}",
                        "hook_us": cost * 1e6,
                        "step_us_without": without * 1e6,
                        "ratio": cost / without,
                    }
                )
    for row in rows:
        figures = ", ".join(f"{k} {v:.4g}" for k, v in row.items() if isinstance(v, float))
        print(f"{row['case']}: {figures}")
    if opts.json:
        print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
