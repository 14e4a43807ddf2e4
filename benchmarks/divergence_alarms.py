"""The divergence warning (`hooks.divergence.diverged`) on seeded loss series: how often
it cries wolf, how often it sees a sharp jump of the last logs.

Five families of 53 training-loss logs that never diverge, each log a level about 3e-3
(the families of tests/hooks/test_divergence_false_alarms.py and its doc's noisier
ones): log-normal noise with sd 0.8 and 1.0 in log (``lognormal_0.8``,
``lognormal_1.0``); heavy-tailed windows, each log the mean of 40 sample losses, one in
40 a hundred times larger (``heavy_tailed``); autocorrelated noise, an AR(1) in log
with coefficient 0.9 and sd 0.8 (``ar1``); a falling curve, exp(-i/4) + 3e-3, to a
plateau, noise sd 0.5 in log (``falling``). A false alarm: a series warned about. A
detection: the same series with its last 1 or 2 logs multiplied by 10 or 100 (a sudden
jump, as a diverging optimisation shows), warned about. No validations and no learning
rates in the history, so only the training-loss clauses speak. ours: the rule as it is;
baseline: its level clause alone (the rule before the sharp-jump clause). Counts out
of the seeds given (default 1000-1199: not the seeds 0-199 the jump's constant
`JUMP_BEYOND` was chosen on).

    python benchmarks/divergence_alarms.py                  # seeds 1000-1199, ~10 s
    python benchmarks/divergence_alarms.py --seeds 0 200 --beyond 2   # tuning
    python benchmarks/divergence_alarms.py --json
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.hooks import divergence  # noqa: E402

LOGS = 53
FAMILIES = ("lognormal_0.8", "lognormal_1.0", "heavy_tailed", "ar1", "falling")
JUMPS = ((10.0, 1), (10.0, 2), (100.0, 1), (100.0, 2))  # (factor, last logs)


def series(seed: int, family: str) -> list[float]:
    """`LOGS` training-loss logs of `family` (see the module's doc), seeded."""
    rng = np.random.default_rng(seed)
    if family.startswith("lognormal_"):
        sd = float(family.removeprefix("lognormal_"))
        return [float(x) for x in 3e-3 * np.exp(sd * rng.standard_normal(LOGS))]
    if family == "heavy_tailed":
        out = []
        for _ in range(LOGS):
            sample = rng.exponential(1e-3, 40)
            hard = rng.random(40) < 1 / 40
            sample[hard] += rng.exponential(1e-1, int(hard.sum()))
            out.append(float(sample.mean()))
        return out
    if family == "ar1":
        phi, sd = 0.9, 0.8
        z = [sd * rng.standard_normal()]
        for _ in range(LOGS - 1):
            z.append(phi * z[-1] + sd * math.sqrt(1 - phi * phi) * rng.standard_normal())
        return [float(x) for x in 3e-3 * np.exp(np.array(z))]
    if family == "falling":
        level = np.exp(-np.arange(LOGS) / 4) + 3e-3
        return [float(x) for x in level * np.exp(0.5 * rng.standard_normal(LOGS))]
    raise ValueError(f"no family {family!r}")


def history(losses: list[float]) -> list[dict[str, float]]:
    """Training logs every 5 steps."""
    return [{"step": 5.0 * (i + 1), "loss": loss} for i, loss in enumerate(losses)]


def warns_now(losses: list[float]) -> bool:
    return divergence.diverged(history(losses)) is not None


def warns_before(losses: list[float]) -> bool:
    """The level clause alone: `diverged` before the sharp-jump clause, on a history
    without validations or learning rates."""
    logs = history(losses)
    return (
        divergence._training_loss_grew([(e["step"], e["loss"]) for e in logs], [], []) is not None
    )


def count(seeds: range, family: str, jump: tuple[float, int] | None) -> tuple[int, int]:
    """(warned now, warned before) over `seeds` of `family`, its last logs jumped by
    `jump` (factor, how many) when given."""
    now = before = 0
    for seed in seeds:
        losses = series(seed, family)
        if jump is not None:
            factor, last = jump
            losses[-last:] = [x * factor for x in losses[-last:]]
        now += warns_now(losses)
        before += warns_before(losses)
    return now, before


def rows(seeds: range) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def row(case: str, got: tuple[int, int], better: Callable[[int, int], float]) -> None:
        now, before = got
        out.append(
            {
                "case": case,
                "ours": now,
                "baseline": before,
                "unit": f"of {len(seeds)}",
                "ratio": better(now, before),
                "target": None,
            }
        )

    for family in FAMILIES:
        # (false alarms: fewer is better; detections: more is better; ratio > 1 better)
        row(f"false_alarms_{family}", count(seeds, family, None), lambda a, b: (b + 1) / (a + 1))
        for factor, last in JUMPS:
            row(
                f"detect_{family}_{factor:.0f}x_last{last}",
                count(seeds, family, (factor, last)),
                lambda a, b: (a + 1) / (b + 1),
            )
    for r in out:
        r["ratio"] = round(r["ratio"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="20 seeds")
    parser.add_argument("--seeds", type=int, nargs=2, default=(1000, 1200), metavar=("FROM", "TO"))
    parser.add_argument(
        "--beyond",
        type=float,
        default=None,
        help="the JUMP_BEYOND to measure (default: the rule's)",
    )
    opts = parser.parse_args()
    seeds = range(opts.seeds[0], opts.seeds[0] + 20 if opts.quick else opts.seeds[1])
    if opts.beyond is not None:
        divergence.JUMP_BEYOND = opts.beyond  # (read by the rule at each call)
    title = (
        f"seeds {seeds.start}-{seeds.stop - 1}, JUMP_BEYOND {divergence.JUMP_BEYOND:g}; "
        "ours: the rule, baseline: its level clause alone; ratio > 1: ours better"
    )
    finish(rows(seeds), title, 34, as_json=opts.json)


if __name__ == "__main__":
    main()
