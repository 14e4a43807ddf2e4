"""The latency of `BreedSampler`'s first draw, with its "lhs" explorer (the default
"auto" explorer's in 6 parameters), in a fresh study and in a resumed one.

Fresh: ours (`plan` then `prepare` compute the design, as the `Launcher` does when
built and started) against the baseline (the first draw computes the design, what it
did before `plan` did). The first draw runs on the launcher's thread under its lock
while the trainer trains; `plan` and `prepare` before anything starts.

Resume: a study's sampler resumed from its state (saved halfway through its design,
read from JSON as a checkpoint holds it) up to its first draw after the resume. Ours:
built and planned (nothing computed), the state loaded (it holds the design), prepared
(nothing to compute), drawn. The baseline is what the code before did: `plan` (when the
`Launcher` is built) optimised the design, the state (without the design) replaced
it, and the first draw after the resume optimised it again.

Per budget `n` (the design's size), rows of the medians over the rounds, in
milliseconds of wall time: the first draw, `plan` + `prepare`, both together (the cost
moved, not removed), and the resume. Ours and the baseline alternate (ours first in
even rounds, second in odd ones), the same seed each round; their draws are compared
(``float.hex``; after a resume, with the uninterrupted sampler's too): a difference
stops the run. scipy's import and a first design are paid before the clock starts (a
study pays that import once).

    python benchmarks/breed_first_draw.py             # n = 48, 256; 7 rounds
    python benchmarks/breed_first_draw.py --quick --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.launcher import BreedSampler  # noqa: E402

#: 6 varying parameters: the explorer "auto" is "lhs"
BOX = {f"p{i}": (0.0, 1.0) for i in range(6)}
#: the first draws compared between ours and the baseline
COMPARED = 5


def hexed(draws: list[dict[str, float]]) -> list[dict[str, str]]:
    return [{k: v.hex() for k, v in d.items()} for d in draws]


def one(n: int, seed: int, ours: bool) -> tuple[float, float, list[dict[str, str]]]:
    """(plan + prepare seconds, first draw seconds, the first draws as hex) of one
    fresh sampler."""
    sampler = BreedSampler(BOX, seed=seed)
    assert sampler.engine == "lhs"
    start = time.perf_counter()
    sampler.plan(n)
    if ours:
        sampler.prepare()
    planned = time.perf_counter()
    first = sampler.draw()
    drawn = time.perf_counter()
    draws = [first] + [sampler.draw() for _ in range(COMPARED - 1)]
    return planned - start, drawn - planned, hexed(draws)


def saved(n: int, seed: int) -> tuple[str, str, list[dict[str, str]]]:
    """A study's sampler state saved halfway through its design, as JSON: as saved now
    (the design held) and as saved before (without it, nor the draws' counts); and the
    uninterrupted sampler's next draws (hex)."""
    sampler = BreedSampler(BOX, seed=seed)
    sampler.plan(n)
    sampler.prepare()
    for _ in range(n // 2):
        sampler.draw()
    state = sampler.state_dict()
    older = {k: v for k, v in state.items() if k not in ("observed_at_draw", "adaptive_draws")}
    older["exploration_state"] = {
        k: v for k, v in state["exploration_state"].items() if k != "design"
    }
    assert "design" in state["exploration_state"]
    after = hexed([sampler.draw() for _ in range(COMPARED)])
    return json.dumps(state), json.dumps(older), after


def resume(n: int, seed: int, text: str, ours: bool) -> tuple[float, list[dict[str, str]]]:
    """(seconds from the sampler's construction to its first draw after the resume,
    its draws after the resume as hex)."""
    start = time.perf_counter()
    sampler = BreedSampler(BOX, seed=seed)
    sampler.plan(n)  # (the Launcher's construction)
    if not ours:
        sampler.prepare()  # what `plan` did before: optimise the design
    sampler.load_state_dict(json.loads(text))  # (the checkpoint's)
    if ours:
        sampler.prepare()  # (the Launcher's start: nothing to compute, the state held it)
    first = sampler.draw()
    elapsed = time.perf_counter() - start
    return elapsed, hexed([first] + [sampler.draw() for _ in range(COMPARED - 1)])


def row(case: str, ours: list[float], baseline: list[float]) -> dict[str, Any]:
    a, b = statistics.median(ours) * 1e3, statistics.median(baseline) * 1e3
    return {"case": case, "ours": a, "baseline": b, "unit": "ms",
            "ratio": b / a if a > 0 else None, "target": None}  # fmt: skip


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
        resumes: dict[bool, list[float]] = {True: [], False: []}
        for r in range(rounds):
            seen = {}
            for ours in (True, False) if r % 2 == 0 else (False, True):
                plan_s, first_s, draws = one(n, seed=r, ours=ours)
                times[ours].append((plan_s, first_s))
                seen[ours] = draws
            if seen[True] != seen[False]:
                raise SystemExit(f"n={n}, seed {r}: ours and the baseline drew differently")
            state, older, after = saved(n, seed=r)
            for ours in (True, False) if r % 2 == 0 else (False, True):
                seconds, draws = resume(n, r, state if ours else older, ours)
                resumes[ours].append(seconds)
                if draws != after:
                    raise SystemExit(f"n={n}, seed {r}: a resume drew other than the uninterrupted")
        for part, pick in (
            ("first draw", lambda t: t[1]),
            ("plan + prepare", lambda t: t[0]),
            ("plan + prepare + first draw", lambda t: t[0] + t[1]),
        ):
            rows.append(row(f"n={n}: {part}", [pick(t) for t in times[True]],
                            [pick(t) for t in times[False]]))  # fmt: skip
        rows.append(row(f"n={n}: resume to its first draw", resumes[True], resumes[False]))
    finish(
        rows,
        f"BreedSampler, 6 parameters, explorer lhs: medians of {rounds} rounds (wall ms)",
        as_json=args.json,
        notes=[
            "ratio: baseline / ours (above 1: ours faster). The plan + prepare row is the "
            "cost moved to the Launcher's construction and start; the first draw's, off the "
            "launcher's lock. The resume row: from the sampler's construction to its first "
            "draw after loading a state saved halfway (the baseline optimised the design "
            "twice: when built, and again at that draw).",
            "Wall time on whatever machine runs it: a busy one spreads the figures.",
        ],
        sizes=sizes,
        rounds=rounds,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
