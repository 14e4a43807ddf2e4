"""The latency of `BreedSampler`'s first draw after `plan`, with its "lhs" explorer (the
default "auto" explorer's in 6 parameters): ours (`plan` computes the design, as
`DensitySampler.plan` does) against the baseline (`plan` leaves the design to the first
draw, what it did before: the same sampler with `Exploration.prepare` a no-op during
`plan`). The first draw runs on the launcher's thread under its lock while the trainer
trains; `plan` runs when the `Launcher` is built, before anything starts.

Per budget `n` (the design's size), rows of the medians over the rounds, in
milliseconds of wall time: the first draw, `plan`, and both together (the cost moved,
not removed). Ours and the baseline alternate (ours first in even rounds, second in odd
ones), the same seed each round; their first draws are compared (``float.hex``): a
difference stops the run. scipy's import and a first design are paid before the clock
starts (a study pays that import once, in `plan` with ours).

    python benchmarks/breed_first_draw.py             # n = 48, 256; 7 rounds
    python benchmarks/breed_first_draw.py --quick --json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.launcher import BreedSampler  # noqa: E402
from melissa_trainer.launcher.exploration import Exploration  # noqa: E402

#: 6 varying parameters: the explorer "auto" is "lhs"
BOX = {f"p{i}": (0.0, 1.0) for i in range(6)}
#: the first draws compared between ours and the baseline
COMPARED = 5


def one(n: int, seed: int, ours: bool) -> tuple[float, float, list[dict[str, str]]]:
    """(plan seconds, first draw seconds, the first draws as hex) of one sampler."""
    sampler = BreedSampler(BOX, seed=seed)
    assert sampler.engine == "lhs"
    start = time.perf_counter()
    if ours:
        sampler.plan(n)
    else:
        with mock.patch.object(Exploration, "prepare", lambda self: None):
            sampler.plan(n)
    planned = time.perf_counter()
    first = sampler.draw()
    drawn = time.perf_counter()
    draws = [first] + [sampler.draw() for _ in range(COMPARED - 1)]
    return planned - start, drawn - planned, [{k: v.hex() for k, v in d.items()} for d in draws]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[48, 256])
    parser.add_argument("--rounds", type=int, default=7)
    add_flags(parser, quick="n = 16, 2 rounds: checks, no figure")
    args = parser.parse_args(argv)
    sizes, rounds = ([16], 2) if args.quick else (args.sizes, args.rounds)

    one(8, 0, ours=True)  # scipy.stats imported, a first design optimised: off the clock
    rows: list[dict[str, Any]] = []
    for n in sizes:
        times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for r in range(rounds):
            seen = {}
            for ours in (True, False) if r % 2 == 0 else (False, True):
                plan_s, first_s, draws = one(n, seed=r, ours=ours)
                times[ours].append((plan_s, first_s))
                seen[ours] = draws
            if seen[True] != seen[False]:
                raise SystemExit(f"n={n}, seed {r}: ours and the baseline drew differently")
        for part, pick in (
            ("first draw", lambda t: t[1]),
            ("plan", lambda t: t[0]),
            ("plan + first draw", lambda t: t[0] + t[1]),
        ):
            a = statistics.median(pick(t) for t in times[True]) * 1e3
            b = statistics.median(pick(t) for t in times[False]) * 1e3
            rows.append(
                {"case": f"n={n}: {part}", "ours": a, "baseline": b, "unit": "ms",
                 "ratio": b / a if a > 0 else None, "target": None}
            )  # fmt: skip
    finish(
        rows,
        f"BreedSampler, 6 parameters, explorer lhs: medians of {rounds} rounds (wall ms)",
        as_json=args.json,
        notes=[
            "ratio: baseline / ours (above 1: ours faster). The plan row is the cost moved "
            "to the Launcher's construction; the first draw's, off the launcher's lock.",
            "Wall time on whatever machine runs it: a busy one spreads the figures.",
        ],
        sizes=sizes,
        rounds=rounds,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
