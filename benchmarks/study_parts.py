"""Where the on arm's extra CPU goes in `surrogate_cost.py`'s study (issue 46, eleventh
round): the training thread's CPU per step split by the loop's events
(`parts_clock.PartsClock`: data, backward, update, between), per phase (while the
simulations stream; after), on against off, and the sampler's CPU per streaming step.

The studies are `surrogate_cost.py`'s (its ``--space``, 48 simulations, the density
sampler by default): **on** a study steered by the adaptive sampler (the per-sample
losses tracked, reduced every 20 steps and fed to the sampler, whose draws run on the
launcher's thread), **off** the very same simulations replayed without tracking. A
pair's two studies run in one fresh process, in alternating order from pair to pair
(on, off; off, on, the on arm's sampler then working as ever on the replayed draws:
`surrogate_cost.force_draws`), no reference step. Per study and block: its CPU-seconds
over the phase's steps, in microseconds a step; figures: medians over the pairs.

Rows (no target: a diagnostic of the target's row of `surrogate_cost.py`): per phase and
block on / off; per phase the four together; **the reduction** (the on arm's update on
a reduction step minus its mean update on the others: the tracker's reduction and the
SIMULATION_LOSSES hooks, per reduction); **the sampler**'s CPU per streaming step (its
draws and observations while the steps ran, wherever they ran; `SamplerClock`).

    python benchmarks/study_parts.py --pairs 6 --json
    python benchmarks/study_parts.py --quick     # tiny: checks the pipeline, no figure
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
import surrogate_cost as sc  # noqa: E402
from parts_clock import BLOCKS, PHASES  # noqa: E402
from report import add_flags, finish  # noqa: E402

US = 1e6


def pair(setup: bench.Setup, i: int, replayed: list[dict[str, float]], work: Path,
         kind: str) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """On / off pair `i` in one process (`cost_spread.run_pair`'s orders, no reference):
    an even pair runs on (its draws free) then off replaying them; an odd pair off,
    replaying `replayed`, then on, its sampler working on those same draws."""
    seed = 2000 + i
    if i % 2 == 0:
        specs = [sc.spec(setup, seed, None, work / "on", kind, parts=True),
                 sc.spec(setup, seed, sc.PREVIOUS, work / "off", parts=True)]  # fmt: skip
    else:
        specs = [sc.spec(setup, seed, replayed, work / "off", parts=True),
                 sc.spec(setup, seed, None, work / "on", kind, replayed, parts=True)]  # fmt: skip
    runs = sc.children(specs)
    on, off = runs if i % 2 == 0 else runs[::-1]
    if on["draws"] != off["draws"]:
        raise RuntimeError(f"pair {i}: the arms ran different simulations")
    return on, off


def per_step(run: dict[str, Any], phase: str, block: str) -> float:
    """A study's CPU in `block` during `phase`, microseconds a step (0 without steps)."""
    parts = run["parts"]
    steps = parts["steps"][phase]
    return parts["cpu"][phase][block] / steps * US if steps else 0.0


def reduction(run: dict[str, Any], phase: str) -> float | None:
    """The mean update of a reduction step minus that of the others, microseconds
    (None when the phase lacks either)."""
    updates = run["parts"]["updates"][phase]
    (r_sum, r_n), (o_sum, o_n) = updates["reduction"], updates["other"]
    if not r_n or not o_n:
        return None
    return (r_sum / r_n - o_sum / o_n) * US


def sampler_per_streaming_step(run: dict[str, Any]) -> float:
    """The sampler's CPU while the steps ran, per step of the streaming phase (us)."""
    steps = run["parts"]["steps"]["stream"]
    return run["sampler_cpu_seconds"] / steps * US if steps else 0.0


def _row(case: str, on: float, off: float, unit: str = "us/step", ratio: bool = True,
         ) -> dict[str, Any]:  # fmt: skip
    # (time: the ratio off / on, higher better as every row's; None over a nil cost, or
    # where the off arm's figure is not a cost of the same work: `ratio` False)
    ratio_value = round(off / on, 3) if ratio and on > 0 and off > 0 else None
    return {"case": case, "ours": round(on, 2), "baseline": round(off, 2), "unit": unit,
            "ratio": ratio_value, "target": None}  # fmt: skip


def rows(ons: list[dict[str, Any]], offs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The table (module docstring): medians over the pairs."""
    med = statistics.median
    out = []
    for phase in PHASES:
        if not all(r["parts"]["steps"][phase] for r in ons + offs):
            continue  # (a quick study may end before its stream does)
        for block in BLOCKS:
            out.append(_row(f"{phase}, {block}, {kind} on / off",
                            med(per_step(r, phase, block) for r in ons),
                            med(per_step(r, phase, block) for r in offs)))  # fmt: skip
        out.append(_row(f"{phase}, the four together, {kind} on / off",
                        med(sum(per_step(r, phase, b) for b in BLOCKS) for r in ons),
                        med(sum(per_step(r, phase, b) for b in BLOCKS) for r in offs)))  # fmt: skip
        cuts = [(reduction(a, phase), reduction(b, phase)) for a, b in zip(ons, offs, strict=True)]
        if all(a is not None and b is not None for a, b in cuts):
            out.append(_row(f"{phase}, a reduction step's update beyond the others' (the "
                            "reduction and its hooks), on / off",
                            med(a for a, _ in cuts), med(b for _, b in cuts),
                            "us", ratio=False))  # fmt: skip
    out.append(_row(f"the sampler's CPU per streaming step, {kind} on / off",
                    med(sampler_per_streaming_step(r) for r in ons),
                    med(sampler_per_streaming_step(r) for r in offs),
                    ratio=False))  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--space", choices=sorted(bench.SPACES), default="wide")
    p.add_argument("--pairs", type=int, default=None, help="on/off pairs (default 6; quick 1)")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--sampler", choices=("surrogate", "density"), default="density")
    add_flags(p, quick="tiny: checks the pipeline, no figure")
    opts = p.parse_args()
    setup = bench.Setup(space=opts.space, steps=opts.steps)
    if opts.quick:  # as surrogate_cost.py's --quick
        setup = replace(setup, grid_size=6, time_steps=5, hidden=16, simulations=10, steps=200,
                        batch_size=8, watermark=8)  # fmt: skip
    pairs = opts.pairs or (1 if opts.quick else 6)
    work = Path(tempfile.mkdtemp(prefix="study-parts-"))
    ons, offs = [], []
    try:
        replayed: list[dict[str, float]] = []
        for i in range(pairs):
            on, off = pair(setup, i, replayed, work / str(i), opts.sampler)
            replayed = on["draws"]
            ons.append(on)
            offs.append(off)
            if not opts.json:
                print(f"pair {i}: on {on['steps_per_step_cpu_second']:.1f}, off "
                      f"{off['steps_per_step_cpu_second']:.1f} steps per CPU-second of the "
                      "step and the sampler", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    title = (f"{opts.space} space, {setup.simulations} simulations, {setup.steps} steps, "
             f"{pairs} pair(s): the training thread's CPU per step, by part (the machine "
             "may be busy)")  # fmt: skip
    finish(rows(ons, offs, opts.sampler), title, width=70, as_json=opts.json)


if __name__ == "__main__":
    main()
