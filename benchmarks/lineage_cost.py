"""What `SampleLedger` costs a training step: is it cheap enough to leave on?

Two measures, each row with its baseline from the same run:

* ``trainer_b{B}``: an in-process trainer (an MLP of width 256 on 64 inputs, fifo
  buffer, batch B) run `--rounds` times, the ledger on in every other block of
  `BLOCK` steps (A/B interleaved within each run); each run's median step time of
  each arm, then the median over runs. ``ratio`` = without / with (1: free). The step
  time is the training thread's CPU time between `on_step_end`s (`time.thread_time`,
  torch on one thread): on a shared machine, wall time measures the other processes
  more than the hook.
* ``hook_b{B}_{block|samples}``: the hook's own work per step (`on_batch_ready` on a
  batch of B samples as a block or as per-sample dicts, then `on_step_end`'s write),
  median of many calls, added to the trainer's median step without the ledger
  (``ours``) against that step (``baseline``).

Rows: ``ours`` (with the ledger) and ``baseline`` (without) in microseconds per step,
``ratio`` = baseline / ours (1: free).

    python benchmarks/lineage_cost.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import finish  # noqa: E402

#: steps per block of the in-run A/B: the ledger on in every other block
BLOCK = 8


class Interleaved(Hook):
    """The step clock, and the ledger on in every other block of `BLOCK` steps (A/B
    within one run: the machine's drift falls on both arms alike). The clock is the
    training thread's CPU time (`time.thread_time`) at each `on_step_end`."""

    def __init__(self, ledger: SampleLedger) -> None:
        self.ledger = ledger
        self.times: list[tuple[float, bool]] = []

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        self.ledger.on_train_start(trainer, state, control)

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        if (state.global_step // BLOCK) % 2:
            self.ledger.on_batch_ready(trainer, state, control, batch)

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        on = ((state.global_step - 1) // BLOCK) % 2 == 1
        if on:
            self.ledger.on_step_end(trainer, state, control)
        self.times.append((time.thread_time(), on))

    def close(self) -> None:
        self.ledger.close()


def samples(n: int, width: int = 64) -> Any:
    rng = np.random.default_rng(0)
    for i in range(n):
        yield {"x": rng.standard_normal(width).astype(np.float32),
               "simulation_id": np.array(i % 50), "time_step": np.array(i // 50)}  # fmt: skip


def step_medians(folder: Path, batch: int, steps: int) -> tuple[float, float]:
    """One run's median step time (s) without and with the ledger (`Interleaved`)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.SiLU(), torch.nn.Linear(256, 64))
    clock = Interleaved(SampleLedger(folder / "lineage"))
    args = TrainingArguments(
        output_dir=str(folder), batch_size=batch, buffer="fifo", buffer_size=4 * batch,
        report_to="none", disable_progress_bar=True, save_at_end=False,
        simulation_loss_steps=0, logging_steps=10**9, save_seconds=None,
    )  # fmt: skip
    OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=samples(batch * steps),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"])),
        hooks=[clock],
    ).train()  # fmt: skip
    gaps: dict[bool, list[float]] = {False: [], True: []}
    for (before, _), (after, on) in zip(
        clock.times[BLOCK:-1], clock.times[BLOCK + 1 :], strict=True
    ):
        gaps[on].append(after - before)  # (the first block: warm-up)
    return float(np.median(gaps[False])), float(np.median(gaps[True]))


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


def row(case: str, ours: float, baseline: float) -> dict[str, Any]:
    """A row in the benchmarks' form: step times in microseconds, ``ratio`` = baseline /
    ours (1: the ledger costs nothing; lower is worse)."""
    return {"case": case, "ours": round(ours * 1e6, 2), "baseline": round(baseline * 1e6, 2),
            "unit": "us/step", "ratio": round(baseline / ours, 4), "target": None}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    parser.add_argument("--json", action="store_true", help='last line: {"rows": [...]}')
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args()
    torch.set_num_threads(1)  # (all the step's compute on the thread the clock reads)
    rounds = opts.rounds or (3 if opts.quick else 7)
    steps, calls = (10 * BLOCK, 300) if opts.quick else (50 * BLOCK, 2000)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (16, 256):
            runs: list[tuple[float, float]] = [
                step_medians(Path(tmp) / f"t{batch}-{r}", batch, steps) for r in range(rounds)
            ]
            without = statistics.median(w for w, _ in runs)
            with_ = statistics.median(w for _, w in runs)
            rows.append(row(f"trainer_b{batch}", with_, without))
            each = ", ".join(f"{w * 1e6:.0f}/{o * 1e6:.0f}" for w, o in runs)
            print(f"trainer_b{batch}: each run's median step, without/with (us): {each}")
            for block in (True, False):
                cost = hook_cost(Path(tmp), batch, block, calls)
                kind = "block" if block else "samples"
                # the hook's own work added in full to the step without it
                rows.append(row(f"hook_b{batch}_{kind}", without + cost, without))
    finish(rows, "SampleLedger's cost per step: with the ledger (ours) vs without",
           as_json=opts.json, table_too=True)  # fmt: skip


if __name__ == "__main__":
    main()
