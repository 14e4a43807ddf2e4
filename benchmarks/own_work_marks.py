"""What marking the training thread's own work costs a step (`ReadClock.work_began` /
`work_ended` around every hook dispatch and action point, `study.starvation`).

The marks run only when the source has a starvation watch (a `StreamSource`'s, a
`Study`'s); `trainer_overhead.py`'s source (`Prefilled`) has none, so that benchmark
(A/B against the base with `ab.py`) times the dispatch without them. This one times
`trainer_overhead.py`'s OnlineTrainer (its workload, its default hooks but the progress
bar) on `Prefilled` with a watch's clock (marks on) against without (marks off),
interleaved rounds, in steps per CPU-second of the process (a busy machine disturbs it
less than wall time); ratio = on / off (target: 0.99, the noise of such rounds). It
also times one `HookList.fire` of an event with one listener, marks on and off, in ns (with the
default hooks a step makes one such dispatch, STEP_END; a log one more, and its
action point).

    python benchmarks/own_work_marks.py --quick [--json]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import timeit
from typing import Any

import torch
from report import add_flags, print_json
from trainer_overhead_workload import (
    BATCH,
    N_SAMPLES,
    Prefilled,
    make_model,
    make_samples,
    process_sample,
)

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.hooks import Event, HookList
from melissa_trainer.stream.read_clock import ReadClock


class Watched(Prefilled):
    """`Prefilled` with a starvation watch's clock, as a stream's source has."""

    def __init__(self, samples: list[Any]) -> None:
        super().__init__(samples)
        self.starvation = self
        self.reads = ReadClock()


def fire_ns(marks: bool, n: int = 200_000) -> float:
    """ns per `HookList.fire` of STEP_END with one listener that does nothing."""

    class Listener(Hook):
        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            pass

    hooks = HookList([Listener()])
    hooks.work = ReadClock() if marks else None
    return min(timeit.repeat(lambda: hooks.fire(Event.STEP_END, None, None, None),
                             number=n, repeat=5)) / n * 1e9  # fmt: skip


class CpuClock(Hook):
    """The process's CPU seconds from TRAIN_START to LOOP_END (steadier than wall time
    on a machine other processes load)."""

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        self.start = time.process_time()

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.seconds = time.process_time() - self.start


def run(samples: list[Any], steps: int, out: str, seed: int, marks: bool) -> float:
    """Steps per CPU-second of `trainer_overhead.py`'s OnlineTrainer (its `run_ours`:
    a reservoir without rate limit, the default hooks), its source with a watch's clock
    (`marks`) or without."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out, batch_size=BATCH, buffer="reservoir", sample_to_insert_ratio=0,
        buffer_size=N_SAMPLES, watermark=BATCH, max_steps=steps, save_at_end=False,
        seed=seed, disable_progress_bar=True,
    )  # fmt: skip
    model, clock = make_model(seed), CpuClock()
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-4),
        train_source=(Watched if marks else Prefilled)(samples),
        process_sample=process_sample, hooks=[clock],
    )  # fmt: skip
    trainer.train()
    assert (trainer.hooks.work is not None) == marks
    return steps / clock.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    opts = parser.parse_args()
    rounds, steps = (5, 200) if opts.quick else (11, 1000)
    torch.set_num_threads(1)
    samples = make_samples(N_SAMPLES, seed=0)
    out = tempfile.mkdtemp(prefix="mt-own-work-")
    on, off = [], []
    try:
        run(samples, 20, out, seed=0, marks=True)  # warm-up
        for r in range(rounds):
            for marks in (True, False) if r % 2 else (False, True):
                (on if marks else off).append(run(samples, steps, out, seed=r, marks=marks))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    fire_on, fire_off = fire_ns(True), fire_ns(False)
    rows = [
        {"case": "OnlineTrainer, marks on vs off", "ours": statistics.median(on),
         "baseline": statistics.median(off), "unit": "steps/CPU-s",
         "ratio": statistics.median(on) / statistics.median(off), "target": 0.99,
         "runs_on": on, "runs_off": off},
        {"case": "HookList.fire, 1 listener, marks on vs off", "ours": fire_on,
         "baseline": fire_off, "unit": "ns", "ratio": fire_off / fire_on, "target": None},
    ]  # fmt: skip
    if opts.json:
        print_json(rows)
        return
    print(f"rounds {rounds} x {steps} steps, interleaved (medians)")
    for r in rows:
        print(f"{r['case']:<46} {r['ours']:>10.1f} {r['baseline']:>10.1f} {r['unit']:>8} "
              f"{r['ratio']:>6.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
