"""What the study examples (`heat_pde/`, `lorenz/`, `navier_stokes/`; `heat_c/` some of
it) share: the study's options, the study (or, with --external, the stream source) built
from them, `run_seeds` (``--seeds``), and (from `study_report`, re-exported here) the
timings of the JSON summary and what a run prints.

An example imports it after adding this folder (its parent folder) to `sys.path`; a
copy of an example needs this file and study_report.py one folder up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

# what the examples report after a run: its own module, re-exported here (the examples
# and their tests import every name from study_common)
from study_report import (  # noqa: F401
    StepTimer,
    adaptive_summary,
    compared,
    final_eval_loss,
    final_eval_tails,
    print_overlap,
    print_refused,
    received_samples,
    run_summary,
    sequential_seconds,
)

from melissa_trainer import (
    CheckpointError,
    OnlineTrainer,
    ReceiverConfig,
    Source,
    StreamSource,
    Study,
)
from melissa_trainer.config.arguments import ConfigError, load_config_file
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.study_change import StudyChanged
from melissa_trainer.launcher.worker_mode import DEFAULT_WORKER_BIND
from melissa_trainer.trainer.output_lock import OutputDirLocked

#: the options the examples give a sampler: Breed breeds 30% of its draws (its own
#: default, exploration 1.0, explores only: docs/measured.md, "Active sampling"), so that
#: `--sampler breed` shows adaptive sampling (the heat example's defaults: 12-16 of 64
#: draws bred; not a gain: its worst held-out simulations erred more than exploring
#: alone's, docs/measured.md, "The examples' Breed judged on the worst cases"), and
#: explores with the gap-filling Sobol' sequence (its default "auto" takes a Latin
#: hypercube of the study's size above 3 varying parameters, which would refuse another
#: --num_simulations on resume): it resumes the examples' checkpoints written when 0.7
#: and "sobol" were the defaults
SAMPLER_OPTIONS: dict[str, dict[str, Any]] = {"breed": {"exploration": 0.7, "explorer": "sobol"}}
#: Parameter name -> (low, high), as `make_sampler` takes it.
Bounds = Mapping[str, tuple[float, float]]


@dataclass
class StudyArgs:
    """The study's options; an example's own dataclass extends them."""

    num_simulations: int = field(default=64, metadata={"help": "simulations in the study"})
    job_limit: int = field(default=2, metadata={"help": "simulations running at once"})
    backend: str = field(
        default="local",
        metadata={"help": "where simulations run", "choices": ("local", "mpiexec", "slurm")},
    )
    sampler: str = field(
        default="lhs",
        metadata={"help": "parameter sampler", "choices": ("lhs", "uniform", "halton", "sobol")},
    )
    simulation_timeout: float | None = field(
        default=None,
        metadata={
            "help": "seconds of a solver's silence before it is killed and restarted "
            "(default: derived from the study, LauncherTuning's 'auto')"
        },
    )
    silence_floor: float = field(
        default=LauncherTuning.silence_floor,
        metadata={"help": "with the derived timeout: seconds a solver that has sent a message "
                  "may stay silent before it is killed as hung (at least; 10 x the longest "
                  "silence between two messages seen, if more). Raise it for solvers whose "
                  "steps take longer"},
    )  # fmt: skip
    startup_timeout: float = field(
        default=600.0,
        metadata={"help": "with the derived timeout: seconds a solver may take to send its "
                  "first message (imports, set-up, first step) before it is killed as hung "
                  "(the stream waits at least as long for a first message)"},
    )  # fmt: skip
    bind: str = field(
        default="tcp://127.0.0.1:*",
        metadata={"help": "receiver endpoint (loopback; e.g. tcp://*:* for simulations on "
                  "other nodes, behind a firewall)"},
    )  # fmt: skip
    external: bool = field(
        default=False,
        metadata={"help": "launch nothing: wait for NUM_SIMULATIONS solvers started by hand"},
    )
    nonfinite: str = field(
        default="refuse",
        metadata={"help": "samples holding NaN or Inf: refuse (drop and count), accept "
                  "(train on them), fail (fail their simulation)",
                  "choices": ("refuse", "accept", "fail")},
    )  # fmt: skip
    json: bool = field(default=False, metadata={"help": "print a JSON summary as the last line"})
    seeds: int = field(
        default=1,
        metadata={"help": "run the whole study this many times, with seeds SEED, SEED+1, ... "
                  "(each in OUTPUT_DIR/seed-S, one after the other), and report the spread "
                  "of the validation error: what one run's figure is worth"},
    )  # fmt: skip

    def problems(self) -> list[str]:
        """What is wrong with these values (a subclass adds its own checks)."""
        return [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("num_simulations", "job_limit", "seeds")
            if getattr(self, name) < 1
        ] + [
            f"{name}={getattr(self, name)} must be > 0 (seconds)"
            for name in ("silence_floor", "startup_timeout")
            if not getattr(self, name) > 0
        ]

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError(f"invalid {type(self).__name__}: " + "; ".join(problems))


#: TrainingArguments fields that only a reservoir buffer takes (FIFO and FIRO refuse them)
RESERVOIR_ONLY = ("max_sample_reuse", "sample_to_insert_ratio", "sample_to_insert_tolerance")


def buffer_defaults(defaults: Mapping[str, Any], argv: Sequence[str] | None) -> dict[str, Any]:
    """An example's `defaults` for the buffer its command line chooses (``--buffer``,
    else its ``--config`` file's, else the default's): with a FIFO or FIRO, the
    example's reservoir-only defaults (its rate limit, `sample_to_insert_ratio`) are
    left out, since those buffers refuse them; given explicitly they are still refused,
    by an error that names the fix. `argv` None: ``sys.argv[1:]``."""
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--buffer")
    peek.add_argument("--config")
    known, _ = peek.parse_known_args(argv)
    buffer = known.buffer
    if buffer is None and known.config:
        # a bad file: the example's own parse reports it
        with contextlib.suppress(ConfigError):
            buffer = load_config_file(known.config).get("buffer")
    buffer = str(buffer if buffer is not None else defaults.get("buffer", "reservoir"))
    if buffer.strip().lower() == "reservoir":
        return dict(defaults)
    return {k: v for k, v in defaults.items() if k not in RESERVOIR_ONLY}


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
    max / min). A failed seed ends the program with its exit status.

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
        runs.append({"seed": seed, metric: summary[metric], "output_dir": str(out)})
        print(f"seed {seed}: {metric} {summary[metric]:.4g}", flush=True)
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


def check_matplotlib(plot: bool) -> None:
    """Exit now, not after training, if `plot` needs a matplotlib that is not installed."""
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit(
                '--plot needs matplotlib: pip install "melissa-trainer[examples]", or --no_plot'
            )


#: what refuses to start a run, each naming the fix: a `ConfigError` (such as an earlier
#: run's checkpoints in `output_dir`), `OutputDirLocked` (another trainer using it),
#: `StudyChanged` (a resume with other study settings: sampler, bounds, a number of
#: simulations the design cannot take) and `CheckpointError` (no checkpoint to resume from
#: verifies or loads)
REFUSALS = (ConfigError, OutputDirLocked, StudyChanged, CheckpointError)


@contextlib.contextmanager
def refusals_end_the_program() -> Iterator[None]:
    """Around an example's `main()`: a refusal to start (`REFUSALS`) ends the program
    with its message on one line and exit status 2, as a bad option does, instead of a
    traceback (on each rank that raised it). Anything else propagates."""
    try:
        yield
    except REFUSALS as exc:
        message = " ".join(str(exc).split("\n"))
        print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
        sys.exit(2)


def study_source(
    opts: StudyArgs,
    command: Sequence[str],
    bounds: Bounds,
    seed: int,
    rendezvous: Path,
    fields: Mapping[str, tuple[Any, Any]],
    *,
    worker: bool = False,
    worker_flag: str | None = None,
) -> tuple[Launcher | None, Source]:
    """The trainer's source: a `Study` whose Launcher runs `command` (a Python script
    and its flags) for parameter sets drawn from `bounds`, or with --external no
    launcher and a `StreamSource` waiting for NUM_SIMULATIONS solvers started by hand.
    `fields` is what every solver must declare (one schema per study: a solver
    declaring others is refused). `worker`: worker mode, `command` then being a worker
    that loops on `next_simulation()` (job_limit of them); `worker_flag`: the example's
    flag that turns worker mode on (None: it has none), which the launcher's start-up
    advice then names."""
    if opts.external:
        source = StreamSource(
            ReceiverConfig(
                expected_simulations=opts.num_simulations,
                rendezvous_dir=rendezvous,
                bind=opts.bind,
                fields=fields,
                nonfinite=opts.nonfinite,
            )
        )
        return None, source
    launcher = Launcher(
        simulation=[sys.executable, *command],
        sampler=make_sampler(
            opts.sampler, bounds, seed=seed, **SAMPLER_OPTIONS.get(opts.sampler, {})
        ),
        n_simulations=opts.num_simulations,
        job_limit=opts.job_limit,
        backend=opts.backend,
        tuning=LauncherTuning(
            simulation_timeout=opts.simulation_timeout or "auto",
            silence_floor=opts.silence_floor,
            startup_timeout=opts.startup_timeout,
        ),
        # numpy's BLAS threads would only fight over the cores the trainer uses
        env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        worker=worker,
        # workers on other nodes (Slurm) must reach the launcher's socket: every
        # interface, guarded by CURVE (loopback otherwise, as for one machine)
        worker_bind="tcp://*:*" if worker and opts.backend == "slurm" else DEFAULT_WORKER_BIND,
        worker_hint=worker_flag and f"add {worker_flag} to this example's command line",
    )
    config = ReceiverConfig(
        rendezvous_dir=rendezvous,
        bind=opts.bind,
        fields=fields,
        nonfinite=opts.nonfinite,
        # (no stall_timeout to raise with --startup_timeout: the study's stall watchdog
        # excuses a silence while the launcher's simulations are within that allowance)
    )
    stream = StreamSource(config)
    return launcher, Study(launcher, stream)


def prepare_rendezvous(
    trainer: OnlineTrainer,
    opts: StudyArgs,
    rendezvous: Path,
    command: Sequence[str],
    bounds: Bounds,
    *,
    start_line: str | None = None,
) -> None:
    """Clear `rendezvous` before any receiver publishes its endpoint there (a file left by
    an earlier run would send clients to a dead one); with --external, print how to start
    the solvers: `start_line`, or by default `command` (a Python solver) with its flags."""
    if trainer.is_main_process:
        shutil.rmtree(rendezvous, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    if trainer.is_main_process and opts.external:
        example = json.dumps({name: (low + high) / 2 for name, (low, high) in bounds.items()})
        if start_line is None:
            start_line = (
                f"python {' '.join(command)} --rendezvous {rendezvous} "
                f"--simulation_id ID --parameters '{example}'"
            )
        print(
            f"waiting for {opts.num_simulations} simulations; start each (with a distinct ID) "
            f"with\n  {start_line}",
            flush=True,
        )


def leave_cores_to_simulations(opts: StudyArgs) -> None:
    """Local simulations get `job_limit` cores, torch the rest (at least one), unless
    OMP_NUM_THREADS decides: torch threads spinning on the cores the solvers need slow
    both down (here, 6x fewer training steps per second on 2 cores)."""
    if opts.backend == "local" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - opts.job_limit))
