"""``--seeds``, for the study examples: the whole study run once per seed, each in a
process of its own, and the spread of its figure over the seeds (what one run's figure
is worth), and each seed's worst held-out simulation where the example reports it. Part
of `study_common` (which re-exports `run_seeds` and `run_seeds_if_asked`): an example
imports them from there.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from melissa_trainer import TrainingArguments
from melissa_trainer.common.json_output import to_json

__all__ = ["run_seeds", "run_seeds_if_asked"]


class SeedsOptions(Protocol):
    """What `run_seeds_if_asked` reads of an example's options (`StudyArgs` has them)."""

    seeds: int
    json: bool


#: the summary's key for the largest held-out simulation's error, reported beside the
#: metric for each seed when the example has it (an A/B of samplers compares it per seed)
WORST = "val_mse_max"

#: flags a run of `run_seeds` sets for each seed itself (with their value, if any)
_PER_SEED_FLAGS = {"--seeds": True, "--seed": True, "--output_dir": True, "--json": False,
                   "--plot": False, "--no_plot": False}  # fmt: skip


def _without_per_seed_flags(argv: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _PER_SEED_FLAGS:
            skip = _PER_SEED_FLAGS[name] and "=" not in arg
            continue
        kept.append(arg)
    return kept


def run_seeds(
    script: Path, argv: Sequence[str], seeds: int, first_seed: int, output_dir: Path,
    metric: str = "val_mse", *, plots: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The study `script` run once per seed (``--seeds``), each in its own process and
    ``output_dir/seed-S``, one after the other; prints each seed's `metric` and its
    spread, and returns ``{"seeds": [...], "median", "min", "max", "spread"}`` (spread:
    max / min; a seed's entry also has ``val_mse_max``, its worst held-out simulation's
    error, and its line prints it, when its summary has one). A failed seed ends the
    program with its exit status.

    Each run gets ``--seed S --output_dir ... --json`` (and `argv` without those, nor
    ``--seeds`` or a plot flag); `plots`: `script` has a ``--plot`` flag, turned off in
    each run (``--no_plot``: a seed's figure is not what ``--seeds`` is for). An example
    without one (heat_c) says ``plots=False``: it would refuse ``--no_plot``."""
    import statistics
    import subprocess

    common = _without_per_seed_flags(argv)
    no_plot = ["--no_plot"] if plots else []
    runs = []
    for seed in range(first_seed, first_seed + seeds):
        out = output_dir / f"seed-{seed}"
        command = [sys.executable, str(script), *common, "--seed", str(seed),
                   "--output_dir", str(out), "--json", *no_plot]  # fmt: skip
        print(f"seed {seed}: {out}", flush=True)
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.stdout.write(done.stdout)
            raise SystemExit(f"seed {seed} failed (exit status {done.returncode}): {out}")
        summary = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
        run = {"seed": seed, metric: summary[metric], "output_dir": str(out)}
        worst = summary.get(WORST)  # (an example whose summary has the held-out tails)
        if worst is not None:
            run[WORST] = worst
        runs.append(run)
        tail = "" if worst is None else f", worst held-out simulation {worst:.4g}"
        print(f"seed {seed}: {metric} {summary[metric]:.4g}{tail}", flush=True)
    values = [run[metric] for run in runs]
    report = {
        "seeds": runs,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "spread": max(values) / min(values) if min(values) > 0 else float("inf"),
    }
    print(
        f"{metric} over {seeds} seeds ({first_seed}..{first_seed + seeds - 1}): median "
        f"{report['median']:.4g}, min {report['min']:.4g}, max {report['max']:.4g} "
        f"(max/min {report['spread']:.2f}): compare two settings by their seeds' spread, "
        "not by one run each"
    )
    return report


def run_seeds_if_asked(
    script: Path,
    argv: Sequence[str] | None,
    args: TrainingArguments,
    opts: SeedsOptions,
    metric: str = "val_mse",
    *,
    plots: bool = True,
) -> dict[str, Any] | None:
    """With ``--seeds`` above 1 (`opts.seeds`): the study `script` run once per seed from
    ``args.seed`` in ``args.output_dir`` (`run_seeds`, its `metric` and `plots`), its
    report printed as JSON with ``--json`` (`opts.json`) and returned; None for one
    seed, the example then running its study itself. `argv` None: ``sys.argv[1:]``."""
    if opts.seeds <= 1:
        return None
    given = sys.argv[1:] if argv is None else argv
    output_dir = Path(args.output_dir)
    report = run_seeds(script, given, opts.seeds, args.seed, output_dir, metric, plots=plots)
    if opts.json:
        print(to_json(report))
    return report
