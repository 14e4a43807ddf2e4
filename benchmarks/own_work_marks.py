"""What marking the training thread's own work costs a step (`ReadClock.work_began` /
`work_ended` around every hook dispatch and action point, `study.starvation`).

The marks run only when the source has a starvation watch (a `StreamSource`'s, a
`Study`'s); `trainer_overhead.py`'s source (`Prefilled`) has none, so that benchmark
(A/B against the base with `ab.py`) times the dispatch without them. This one times
`trainer_overhead.py`'s OnlineTrainer (its workload, its default hooks) on `Prefilled`
with a watch's clock (marks on) against without (marks off), interleaved rounds, in
steps/s; ratio = on / off (target: 0.99, the noise of such rounds). It also times one
`HookList.fire` of an event with one listener, marks on and off, in ns (a step fires
4 such events with the default hooks, and 2 action points a log).

    python benchmarks/own_work_marks.py --quick [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import tempfile
import timeit
from typing import Any

import torch
import trainer_overhead
from report import add_flags, print_json
from trainer_overhead import run_ours
from trainer_overhead_workload import N_SAMPLES, Prefilled, make_samples

from melissa_trainer import Hook
from melissa_trainer.hooks import Event, HookList
from melissa_trainer.stream.starvation_watch import ReadClock


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
        with contextlib.redirect_stderr(io.StringIO()):
            run_ours(samples, 20, out, seed=0)  # warm-up
            for r in range(rounds):
                for marks, rates in (
                    ((True, on), (False, off)) if r % 2 else ((False, off), (True, on))
                ):
                    trainer_overhead.Prefilled = Watched if marks else Prefilled  # (run_ours')
                    rates.append(run_ours(samples, steps, out, seed=r))
    finally:
        trainer_overhead.Prefilled = Prefilled
        shutil.rmtree(out, ignore_errors=True)
    fire_on, fire_off = fire_ns(True), fire_ns(False)
    rows = [
        {"case": "OnlineTrainer, marks on vs off", "ours": statistics.median(on),
         "baseline": statistics.median(off), "unit": "steps/s",
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
