"""A/A runs of `surrogate_cost.py`'s studies: how far two studies of the very same code
spread, per design of the measurement (issue 46, ninth round).

Both arms of an A/A pair run the same code on the same simulations: ``off`` (both
replay one list of draws, no tracking, no acquisition) or ``on`` (both run the sampler,
its draws replaced by that same list: `surrogate_cost.force_draws`). Whatever differs
between them is the measurement's noise, which the on / off row must be well under to
judge a 3% target. The designs (`DESIGNS`) run interleaved pair by pair (design 1's
pair, design 2's pair, ...; within a pair the arms' order alternates), so that a
machine whose load drifts weighs on every design alike.

Per pair and per rate (`RATES`), the log-ratio of its two studies; per design and rate:
the median absolute deviation of those log-ratios and their 5-95% range (in percent),
and the spread of the row itself over `pairs` pairs, for both estimators: the ratio of
the arms' medians and the median of the pairs' own ratios (the standard deviation of
the estimator's log over 2000 bootstrap resamples of the pairs).

    python benchmarks/surrogate_cost.py --aa off --designs ref,ref-inproc --pairs 5

The on / off pairs of the benchmark itself (`run_pair`, `pair_line`, `on_off_rows`) are
here too: one design, one place.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import surrogate_cost as sc

#: the ninth round's reference: a step of the model every 10 steps (`step_reference.plan`)
_STEP = {"kind": "step", "every": 10, "offset": 0}
#: the twelfth round's: small products, never right after a reduction
_COMPUTE = {"kind": "compute", "every": 10, "offset": 5}
#: a design: the studies' settings (`surrogate_cost.study`'s ``pin`` and ``ratio``)
DESIGNS: dict[str, dict[str, Any]] = {
    "old": {"pin": False},  # the eighth round's studies, unpinned
    "pinned": {"pin": True},  # the training thread on one core, the rest on the other
    # a pair's two studies one after the other in one process (what differs between
    # processes, e.g. their memory's layout, weighs on both arms alike)
    "inproc": {"pin": False, "inprocess": True},
    "inproc-pinned": {"pin": True, "inprocess": True},
    # the same, with a reference step every 10 steps (`step_reference`), after the
    # reductions' steps too (offset 0: the ninth round's)
    "ref": {"reference": _STEP},
    "ref-pinned": {"pin": True, "reference": _STEP},
    "ref-inproc": {"reference": _STEP, "inprocess": True},
    # the twelfth round's: the reference never right after a reduction (offset 5), the
    # step's or a repeated small product that stays in the first caches
    "ref5-inproc": {"reference": dict(_STEP, offset=5), "inprocess": True},
    "refc-inproc": {"reference": _COMPUTE, "inprocess": True},
}


def run_pair(setup: Any, i: int, replayed: list[dict[str, float]], work: Path, kind: str,
             design: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """On / off pair `i` of `design` (`DESIGNS`' value): (on, off) studies. An even pair
    runs on (its draws free), then off replaying them; an odd pair runs off first,
    replaying `replayed` (the previous pair's draws), then on, whose sampler draws and
    observes as ever while its study launches those same parameters. Both arms run the
    same simulations either way (checked)."""
    options = dict(design)
    together = options.pop("inprocess", False)
    seed = 2000 + i
    if i % 2 == 0:  # on draws freely; off replays its draws
        specs = [sc.spec(setup, seed, None, work / "on", kind, **options),
                 sc.spec(setup, seed, sc.PREVIOUS, work / "off", **options)]  # fmt: skip
    else:  # off replays the last draws; on's sampler works, its study runs them
        specs = [sc.spec(setup, seed, replayed, work / "off", **options),
                 sc.spec(setup, seed, None, work / "on", kind, replayed, **options)]  # fmt: skip
    if together:
        runs = sc.children(specs)
    else:
        runs = []
        for spec in specs:
            if spec["draws"] == sc.PREVIOUS:
                spec["draws"] = runs[-1]["draws"]
            runs.append(sc.children([spec])[0])
    on, off = runs if i % 2 == 0 else runs[::-1]
    if on["draws"] != off["draws"]:
        raise RuntimeError(f"pair {i}: the arms ran different simulations")
    return on, off


def _phase(run: dict[str, Any]) -> tuple[int, float, int, float]:
    """(steps, CPU) while the stream ran and after it (the training thread's CPU plus the
    sampler's in the span); a study whose steps ended before its stream did is all
    stream."""
    steps, cpu = sc.steps_and_cpu(run)
    end = run["stream_end"]
    if end is None:
        return steps, cpu, 0, 0.0
    s_steps, s_cpu = int(end[0]), end[1] + end[2]
    return s_steps, s_cpu, steps - s_steps, cpu - s_cpu


#: a study's rates that the A/A pairs compare: steps per CPU-second of the training
#: thread and the sampler over the whole span (the target's), while the stream ran,
#: after it; and of the process
RATES: dict[str, Callable[[dict[str, Any]], float]] = {
    "span": lambda r: r["steps_per_step_cpu_second"],
    "streaming": lambda r: _phase(r)[0] / max(_phase(r)[1], 1e-9),
    "after the stream": lambda r: _phase(r)[2] / max(_phase(r)[3], 1e-9),
    "process": lambda r: r["steps_per_cpu_second"],
    # the span's rate over its reference's (studies without one: the span's)
    "span / reference": lambda r: r["steps_per_step_cpu_second"] / (r["reference_rate"] or 1.0),
}


#: the target's row: the median of the pairs' on / off ratios of this rate, in the studies
#: of this design; decided on A/A pairs before any on / off run of it (the ninth round:
#: the smallest A/A spread of the candidates, "ref-inproc"; the twelfth: "refc-inproc",
#: whose reference the on arm moves far less (about 1.3%), its normalised rate's
#: estimator 0.86% sd on quiet A/A pairs against 2.76% for the raw rate's:
#: docs/measured.md)
TARGET_RATE = "span / reference"
DEFAULT_DESIGN = "refc-inproc"
#: The control variate is read only while the arms' work leaves the reference alone:
#: when the reference's own rate moves on / off by more than this (the target's own
#: margin, 3%: a correction that large would decide the verdict by itself), the target's
#: row is void and the target falls back to the eighth round's row, the ratio of the
#: arms' medians of the uncorrected rate (the lead's rule, issue 46's ninth round: on the
#: quiet machine the reference moved 0.920 and 0.878, the on arm slowing an untracked
#: step of another model on the same thread)
REFERENCE_TOLERANCE = 0.03


def reference_shift(ons: Sequence[dict[str, Any]], offs: Sequence[dict[str, Any]]) -> float | None:
    """The reference's rate on / off (the ratio of the arms' medians); None without one."""
    if not all(r.get("reference_rate") for r in [*ons, *offs]):
        return None
    return statistics.median(r["reference_rate"] for r in ons) / statistics.median(
        r["reference_rate"] for r in offs
    )


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of `values`, linear between order statistics."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def spread(a: Sequence[float], b: Sequence[float], resamples: int = 2000) -> dict[str, float]:
    """How far the pairs (a[i], b[i]) of two arms of the same code spread, in percent:
    `mad` the median absolute deviation of the log-ratios log(a / b) around their
    median, `p5`..`p95` their range, and `row_sd` / `pair_sd` the bootstrap standard
    deviation of the log of the two estimators over len(a) pairs (the ratio of the arms'
    medians; the median of the pairs' ratios): the row's own noise."""
    logs = [math.log(x / y) for x, y in zip(a, b, strict=True)]
    centre = statistics.median(logs)
    rng = random.Random(46)
    rows, pairs = [], []
    for _ in range(resamples):
        pick = [rng.randrange(len(logs)) for _ in logs]
        rows.append(math.log(statistics.median(a[i] for i in pick)
                             / statistics.median(b[i] for i in pick)))  # fmt: skip
        pairs.append(statistics.median(logs[i] for i in pick))
    return {
        "pairs": len(logs),
        "median": 100 * centre,
        "mad": 100 * statistics.median(abs(x - centre) for x in logs),
        "p5": 100 * quantile(logs, 0.05),
        "p95": 100 * quantile(logs, 0.95),
        "row_sd": 100 * statistics.pstdev(rows),
        "pair_sd": 100 * statistics.pstdev(pairs),
    }


def describe(run: dict[str, Any]) -> str:
    """One study's line: what may vary between studies of the same code."""
    s_steps, s_cpu, p_steps, p_cpu = _phase(run)
    per = lambda cpu, n: 1e3 * cpu / n if n else float("nan")  # noqa: E731
    return (f"{run['steps_per_step_cpu_second']:.1f} steps/cpu-s; streaming {s_steps} steps "
            f"{per(s_cpu, s_steps):.3f} ms each, after {p_steps} steps "
            f"{per(p_cpu, p_steps):.3f} ms; data path {run['data_cpu']:.2f} s "
            f"({run['data_calls']} samples), sampler {run['sampler_cpu_seconds']:.3f} s; "
            f"reference {run['reference_rate'] or 0:.1f} steps/cpu-s; "
            f"span {run['span_wall']:.1f} s wall; solvers {run['children_cpu']:.1f} cpu-s; "
            f"load {run['load'][0]:.1f}-{run['load'][1]:.1f}")  # fmt: skip


def aa(setup: Any, mode: str, designs: Sequence[str], pairs: int, work: Path,
       kind: str, log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Run `pairs` A/A pairs of each design in `designs`, interleaved; returns per design
    its studies (``runs``: [(a, b)]) and per rate its `spread`."""
    draws = sc.free_draws(setup, kind, 2000)
    runs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {d: [] for d in designs}
    for i in range(pairs):
        for design in designs:
            options = dict(DESIGNS[design])
            together = options.pop("inprocess", False)
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            specs = []
            for arm in order:
                path = work / f"{design}-{i}-{arm}".replace(" ", "_").replace(",", "")
                if mode == "off":
                    specs.append(sc.spec(setup, 2000 + i, draws, path, **options))
                else:
                    specs.append(sc.spec(setup, 2000 + i, None, path, kind, draws, **options))
            found = sc.children(specs) if together else [sc.children([s])[0] for s in specs]
            a, b = (run for _, run in sorted(zip(order, found, strict=True), key=lambda x: x[0]))
            runs[design].append((a, b))
            ratios = ", ".join(f"{name} {rate(a) / rate(b):.3f}" for name, rate in RATES.items())
            log(f"A/A {mode} pair {i}, {design}: a / b {ratios}"
                f"\n  a: {describe(a)}\n  b: {describe(b)}")  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for design, both in runs.items():
        out[design] = {"runs": both, "spread": {
            name: spread([rate(a) for a, _ in both], [rate(b) for _, b in both])
            for name, rate in RATES.items()}}  # fmt: skip
    return out


def spread_rows(result: dict[str, dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """The A/A table's rows (`report.print_rows`' form): per design and rate, the MAD of
    the pairs' log-ratios in percent (`ours`), the 5-95% range in `case`."""
    rows = []
    for design, found in result.items():
        for name, s in found["spread"].items():
            rows.append({"case": f"A/A {mode}, {design}, {name}: pairs' log-ratio MAD "
                                 f"(5-95% {s['p5']:+.1f}..{s['p95']:+.1f}%; row's sd "
                                 f"{s['row_sd']:.1f}%, per-pair median's sd "
                                 f"{s['pair_sd']:.1f}%; {s['pairs']} pairs)",
                         "ours": round(s["mad"], 2), "baseline": None, "unit": "%",
                         "ratio": None, "target": None})  # fmt: skip
    return rows


def main_aa(setup: Any, mode: str, designs: Sequence[str], pairs: int, work: Path, kind: str,
            json_rows: bool) -> None:  # fmt: skip
    """`surrogate_cost.py --aa`: run `aa`, print each pair, each design's spreads and,
    with `json_rows`, the last line ``{"rows": [...]}`` (`spread_rows`)."""
    print(
        f"A/A {mode}: {setup.simulations} simulations, {setup.steps} steps, {pairs} "
        f"pair(s) per design, designs interleaved (the machine may be busy)",
        flush=True,
    )
    result = aa(setup, mode, designs, pairs, work, kind, log=lambda line: print(line, flush=True))
    for design, found in result.items():
        for name, s in found["spread"].items():
            print(
                f"A/A {mode} {design:>8} {name:>16}: MAD {s['mad']:.2f}%, 5-95% "
                f"{s['p5']:+.2f}..{s['p95']:+.2f}%, median {s['median']:+.2f}%; "
                f"row sd {s['row_sd']:.2f}%, per-pair median sd {s['pair_sd']:.2f}%"
            )
    if json_rows:
        print(sc.to_json({"rows": spread_rows(result, mode)}))


def pair_line(i: int, on: dict[str, Any], off: dict[str, Any]) -> str:
    """One on / off pair's line: the rates of both arms and their ratios."""
    order = "on, off" if i % 2 == 0 else "off, on"
    parts = []
    for name in ("span", "span / reference", "process"):
        a, b = RATES[name](on), RATES[name](off)
        parts.append(f"{name} on {a:.4g} off {b:.4g} on / off {a / b:.3f}")
    return (f"pair {i} ({order}): " + "; ".join(parts)
            + f"; wall on / off {on['steps_per_second'] / off['steps_per_second']:.3f} (the "
            f"sampler {on['sampler_cpu_seconds']:.3f} s while the steps ran, "
            f"{on['sampler_cpu_seconds_outside']:.3f} s before and after)\n"
            f"  on: {describe(on)}\n  off: {describe(off)}")  # fmt: skip


def on_off_rows(ons: list[dict[str, Any]], offs: list[dict[str, Any]], case: str,
                sampler: str) -> list[dict[str, Any]]:  # fmt: skip
    """The on / off table: first the target's row (the median of the pairs' on / off
    ratios of `TARGET_RATE`), then the eighth round's rows (the ratio of the arms'
    medians of the span's rate, the process's and the wall's; the median of the pairs'
    ratios of the span's rate), then, with a reference, the reference's own rate on / off
    (the control variate is sound only if the arms' work leaves it alone: near 1)."""
    n = len(ons)
    rows = []
    shift = reference_shift(ons, offs)
    void = shift is None or abs(shift - 1.0) > REFERENCE_TOLERANCE
    a, b = [RATES[TARGET_RATE](r) for r in ons], [RATES[TARGET_RATE](r) for r in offs]
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    why = ("VOID: no reference" if shift is None else
           f"VOID: the reference itself moved {shift:.3f} on / off, beyond 1 +- "
           f"{REFERENCE_TOLERANCE}; the target falls back to the next row")  # fmt: skip
    rows.append({"case": f"{case} per CPU-second of the step and the sampler, over the "
                         f"reference's, {sampler} on / off per pair (median of {n} pairs' "
                         f"ratios; the target's row{'; ' + why if void else ''})",
                 "ours": round(ratio, 3), "baseline": 1.0, "unit": "ratio",
                 "ratio": None if void else round(ratio, 3),
                 "target": None if void else sc.TARGET})  # fmt: skip
    for what, unit, rate in (
        ("per CPU-second of the step and the sampler", "steps/cpu-s", RATES["span"]),
        ("per CPU-second of the process", "steps/cpu-s", RATES["process"]),
        ("per wall second", "steps/s", lambda r: r["steps_per_second"]),
    ):
        ours = statistics.median(rate(r) for r in ons)
        base = statistics.median(rate(r) for r in offs)
        # the eighth round's target row carries the target when the reference is void
        fallback = void and rate is RATES["span"]
        note = "; the target, the reference void" if fallback else ""
        rows.append({"case": f"{case} {what}, {sampler} on / off (medians of {n} pairs, "
                             f"alternate orders{note})",
                     "ours": round(ours, 2), "baseline": round(base, 2), "unit": unit,
                     "ratio": round(ours / base, 3),
                     "target": sc.TARGET if fallback else None})  # fmt: skip
    per_pair = statistics.median(RATES["span"](x) / RATES["span"](y)
                                 for x, y in zip(ons, offs, strict=True))  # fmt: skip
    rows.append({"case": f"{case} per CPU-second of the step and the sampler, {sampler} "
                         f"on / off per pair (median of {n} pairs' ratios)",
                 "ours": round(per_pair, 3), "baseline": 1.0, "unit": "ratio",
                 "ratio": round(per_pair, 3), "target": None})  # fmt: skip
    if all(r["reference_rate"] for r in ons + offs):  # the control variate's own shift
        ours = statistics.median(r["reference_rate"] for r in ons)
        base = statistics.median(r["reference_rate"] for r in offs)
        rows.append({"case": f"{case[: case.find(',')]}, reference steps per CPU-second of "
                             f"the training thread, {sampler} on / off (medians of {n} pairs; "
                             "1 if the arms' work leaves the reference alone)",
                     "ours": round(ours, 2), "baseline": round(base, 2), "unit": "steps/cpu-s",
                     "ratio": round(ours / base, 3), "target": None})  # fmt: skip
    return rows
