"""What the step watch costs a window: arming `WaitWatch.stepping` once per window and
pausing it at an action point (`WaitWatch.pause`), against a small CPU model's
training step measured in the same run (docs/how-to/multi-gpu.md, "A rank that
completes no step").

Rows, each a median over `--rounds` interleaved rounds (A B A B: a round times the
watch's operation, then the model's step, so the machine's drift falls on both):

* ``arm_window``: entering and leaving ``watch.stepping(...)`` (the loop does it once
  per window of `stop_sync_steps` steps; its thread started and told to look),
* ``pause_action``: entering and leaving ``watch.pause()`` inside an armed span (an
  action point that acts: a log, a save, a validation),

``ours`` the operation in microseconds, ``baseline`` one training step of an MLP
(64 -> 256 -> 256 -> 64, batch 32, Adam) in microseconds, ``ratio`` = baseline / ours
(how many times a step outweighs the operation; higher is better). The steps
themselves pay nothing: the watch's thread reads the step counter at its looks.

    python benchmarks/wait_watch_cost.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from melissa_trainer.core.wait_watch import WaitWatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

#: the target ratio: a window's arming under 1% of one step (a window is several steps)
TARGET = 100.0


def step_clock() -> Callable[[], float]:
    """One training step of a small MLP on CPU (one torch thread), timed in seconds."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
        torch.nn.ReLU(), torch.nn.Linear(256, 64),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(32, 64), torch.randn(32, 64)

    def one() -> float:
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        return time.perf_counter() - start

    for _ in range(5):  # (warm: the first steps allocate)
        one()
    return one


def arm_clock(watch: WaitWatch, repeats: int) -> Callable[[], float]:
    """Entering and leaving an armed span (`stepping`), seconds a time (the mean of
    `repeats`, the span's thread given no look between them: the loop's case)."""
    done = [1]

    def one() -> float:
        start = time.perf_counter()
        for _ in range(repeats):
            with watch.stepping(lambda: done[0], after=0):
                pass
        return (time.perf_counter() - start) / repeats

    return one


def pause_clock(watch: WaitWatch, repeats: int) -> Callable[[], float]:
    """Entering and leaving `pause` inside an armed span, seconds a time."""
    done = [1]

    def one() -> float:
        with watch.stepping(lambda: done[0], after=0):
            start = time.perf_counter()
            for _ in range(repeats):
                with watch.pause():
                    pass
            return (time.perf_counter() - start) / repeats

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    add_flags(parser, quick="5 rounds")
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    if rounds < 1:
        parser.error(f"--rounds must be >= 1, not {rounds}")
    watch = WaitWatch(rank=0, first=60.0)  # (a bound no operation here reaches)
    step = step_clock()
    cases = {"arm_window": arm_clock(watch, 50), "pause_action": pause_clock(watch, 50)}
    times: dict[str, list[float]] = {name: [] for name in cases}
    steps: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, clock in cases.items():
            times[name].append(clock())
            steps[name].append(step())
    rows = []
    for name in cases:
        ours = statistics.median(times[name]) * 1e6
        baseline = statistics.median(steps[name]) * 1e6
        rows.append({
            "case": name, "ours": round(ours, 2), "baseline": round(baseline, 1),
            "unit": "us", "ratio": round(baseline / ours, 1), "target": TARGET,
        })  # fmt: skip
    finish(
        rows,
        "the step watch's cost (us) against one small CPU step (us)",
        as_json=args.json,
        notes=[f"medians of {rounds} interleaved rounds; ratio = step / operation"],
    )


if __name__ == "__main__":
    main()
