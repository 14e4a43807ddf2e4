"""``--seeds``, for the study examples: the whole study run once per seed, each in a
process of its own, and the spread of its figure over the seeds (what one run's figure
is worth), and each seed's worst held-out simulation where the example reports it. Part
of `study_common` (which re-exports `run_seeds` and `run_seeds_if_asked`): an example
imports them from there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
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
    program with its exit status; so does a seed stopped by a SIGINT or SIGTERM sent
    to this process, which is passed on to the seed's run (it stops at a checkpoint,
    as a single run does: `_run_seed`).

    Each run gets ``--seed S --output_dir ... --json`` (and `argv` without those, nor
    ``--seeds`` or a plot flag); `plots`: `script` has a ``--plot`` flag, turned off in
    each run (``--no_plot``: a seed's figure is not what ``--seeds`` is for). An example
    without one (heat_c) says ``plots=False``: it would refuse ``--no_plot``."""
    import statistics

    common = _without_per_seed_flags(argv)
    no_plot = ["--no_plot"] if plots else []
    runs = []
    for seed in range(first_seed, first_seed + seeds):
        out = output_dir / f"seed-{seed}"
        command = [sys.executable, str(script), *common, "--seed", str(seed),
                   "--output_dir", str(out), "--json", *no_plot]  # fmt: skip
        print(f"seed {seed}: {out}", flush=True)
        code, stdout, stopped_by = _run_seed(command)
        if stopped_by is not None or code != 0:
            sys.stdout.write(stdout)
            how = (
                f"stopped by {signal.Signals(stopped_by).name}"
                if stopped_by is not None
                else "failed"
            )
            left = first_seed + seeds - 1 - seed
            again = (
                "; to go on, run the same command with --resume_from_checkpoint latest "
                "(each seed's run resumes from its checkpoint, or starts afresh without one)"
                if stopped_by is not None
                else ""
            )
            print(
                f"seed {seed} {how} (exit status {code}): {out}"
                + (f"; {left} seed(s) after it not run" if left else "")
                + again,
                file=sys.stderr,
                flush=True,
            )
            # its exit status, as a single run's (130 for Ctrl-C, 143 for SIGTERM); a run
            # killed by signal N (code -N) as a shell says it, 128 + N
            sys.exit(code if code > 0 else 128 - code if code < 0 else 128 + (stopped_by or 0))
        summary = json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])
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


def _run_seed(command: list[str]) -> tuple[int, str, int | None]:
    """Run one seed's `command`: its exit status, its standard output, and the signal
    (SIGINT or SIGTERM) this process received meanwhile, if any.

    A SIGINT or SIGTERM sent to this process is passed on to the seed's run, which
    stops at a checkpoint as a single run does; before, a SIGTERM ended this process
    alone, at once (exit status 143, no word), and the seed's run, orphaned, trained on
    without a checkpoint until it wrote to the pipe its output went to and died of a
    BrokenPipeError (a user trial). (Ctrl-C reaches both processes: the run takes the
    second SIGINT, within its `REPEAT_WINDOW`, for the same request.) On Linux the run
    also gets SIGTERM if this process dies (the launcher's parent-death signal, kill -9
    included), and its output goes to a file, which outlives this process, not a pipe."""
    from melissa_trainer.launcher.backends.pdeathsig import pdeathsig_wrapper, wrapped_argv

    received: list[int] = []
    with tempfile.TemporaryFile("w+") as captured:
        argv = wrapped_argv(list(command), os.environ, pdeathsig_wrapper())
        process = subprocess.Popen(argv, stdout=captured, text=True)

        def forward(signum: int, frame: object) -> None:
            received.append(signum)
            if process.poll() is None:
                process.send_signal(signum)

        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {s: signal.signal(s, forward) for s in stops}
        try:
            code = process.wait()  # (retried after each handler: PEP 475)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        captured.seek(0)
        return code, captured.read(), (received[0] if received else None)
