"""What the study examples (`heat_pde/`, `lorenz/`, `navier_stokes/`; `heat_c/` some of
it) share: the study's options (`StudyArgs`; `WorkerStudyArgs` with ``--worker``), the
parser of their command line (`ShortUsageParser`: a refusal is one line of usage and
the error naming the flag), the study (or, with --external, the stream source) built
from them, the steps of an example's `main` that do not depend on its problem
(`sample_or_batch`, `train_timed`, `print_run_end`), and, re-exported here, ``--seeds``
(`run_seeds_if_asked`, from `study_seeds`) and the timings of the JSON summary and what
a run prints (from `study_report`), and the library's `refusals_end_the_program`
(``melissa_trainer.trainer.refusals``: a refused start is one line, exit status 2).

An example imports it after adding this folder (its parent folder) to `sys.path`; a
copy of an example needs this file, study_report.py and study_seeds.py one folder up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

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
from study_seeds import run_seeds, run_seeds_if_asked  # noqa: F401

from melissa_trainer import (  # noqa: F401 (the refusals: the library's, re-exported)
    REFUSALS,
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    Source,
    StreamSource,
    Study,
    TrainingArguments,
    refusals_end_the_program,
)
from melissa_trainer.common.json_output import to_json
from melissa_trainer.config.arguments import ConfigError, load_config_file
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.silence import Default
from melissa_trainer.launcher.worker_mode import DEFAULT_WORKER_BIND

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
    startup_timeout: float | None = field(
        default=None,
        metadata={"help": "seconds a solver may take to send its first message (imports, "
                  "set-up, first step) before it is killed as hung (the stream waits at "
                  "least as long for a first message); default 600 with the derived "
                  "timeout, --simulation_timeout's when that is given"},
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
        """What is wrong with these values, one line each: every option's own range first
        (`range_problems`), then what must hold between options (`cross_problems`). A
        subclass extends those two, not this: a user trial's ``--grid_size -8`` led with
        "modes=12 needs grid_size >= 24", a check against a grid that cannot exist,
        before the grid size's own error."""
        return self.range_problems() + self.cross_problems()

    def range_problems(self) -> list[str]:
        """Each option's own range (a subclass adds its options')."""
        return [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("num_simulations", "job_limit", "seeds")
            if getattr(self, name) < 1
        ] + [
            f"{name}={getattr(self, name)} must be > 0 (seconds)"
            for name in ("silence_floor", "startup_timeout")
            if getattr(self, name) is not None and not getattr(self, name) > 0
        ]

    def cross_problems(self) -> list[str]:
        """What must hold between options (a subclass adds its own), each left out where
        it means nothing: a bound derived from a value out of its own range (the grid
        size that 12 modes need, against a grid of -8 points) says nothing that the
        range's error does not, and misleads (it names the other option's fix)."""
        problems = []
        # (unset, silence_floor is LauncherTuning's own default, a `Default`)
        if self.simulation_timeout and not isinstance(self.silence_floor, Default):
            problems.append(
                f"silence_floor={self.silence_floor} changes nothing with simulation_timeout="
                f"{self.simulation_timeout}: it shapes only the derived timeout; drop "
                f"--silence_floor, or drop --simulation_timeout to derive the timeout"
            )
        return problems

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:  # one line each, which `ShortUsageParser` prefixes with its flag
            raise ConfigError(problems)


@dataclass
class WorkerStudyArgs(StudyArgs):
    """The study's options and ``--worker``, for an example whose solver has a worker
    mode of its own (its ``--worker``, `melissa_trainer.client.worker.serve_simulations`)."""

    worker: bool = field(default=False, metadata={"help": "worker mode: job_limit solvers "
                         "pay the start-up once each, run simulations in turn"})  # fmt: skip

    def cross_problems(self) -> list[str]:
        problems = super().cross_problems()
        if self.worker and self.external:  # (workers ask the launcher, which --external lacks)
            problems.append("--worker runs the launcher's workers: not with --external")
        return problems


class ShortUsageParser(ArgumentParser):
    """The examples' parser: the library's `ArgumentParser` (its errors name the flag:
    ``argument --num_simulations: num_simulations=0 must be >= 1``), whose refusals print
    one line of usage before that error, not the ~45 lines of every flag (``--help``
    still lists them)."""

    def print_usage(self, file: IO[str] | None = None) -> None:
        # (argparse's error() prints the usage, then "PROG: error: MESSAGE", exit 2)
        self._print_message(
            f"usage: {self.prog} [-h] [--FLAG VALUE ...] (--help lists them)\n", file
        )


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


def check_matplotlib(plot: bool) -> None:
    """Exit now, not after training, if `plot` needs a matplotlib that is not installed."""
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit(
                '--plot needs matplotlib: pip install "melissa-trainer[examples]", or --no_plot'
            )


def study_source(
    opts: StudyArgs,
    command: Sequence[str],
    bounds: Bounds,
    seed: int,
    rendezvous: Path,
    fields: Mapping[str, tuple[Any, Any]],
    *,
    worker_flag: str | None = None,
) -> tuple[Launcher | None, Source]:
    """The trainer's source: a `Study` whose Launcher runs `command` (a Python script
    and its flags) for parameter sets drawn from `bounds`, or with --external no
    launcher and a `StreamSource` waiting for NUM_SIMULATIONS solvers started by hand.
    `fields` is what every solver must declare (one schema per study: a solver
    declaring others is refused). `worker_flag`: the flag, the example's and its
    solver's alike, that turns worker mode on (None: the example has none), which the
    launcher's start-up advice names; with ``opts.worker`` (`WorkerStudyArgs`), the
    launcher runs job_limit workers, `command` and that flag (a solver that then loops
    on `serve_simulations`)."""
    worker = bool(getattr(opts, "worker", False))
    if worker:
        if worker_flag is None:
            raise ValueError("study_source: opts.worker needs the solver's worker_flag")
        command = [*command, worker_flag]
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
            # (unset: LauncherTuning's default, which a numeric timeout leaves out)
            **({} if opts.startup_timeout is None else {"startup_timeout": opts.startup_timeout}),
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


def sample_or_batch(
    args: TrainingArguments, process_sample: Callable[..., Any], process_batch: Callable[..., Any]
) -> dict[str, Any]:
    """`OnlineTrainer`'s keyword for the mapping to (inputs, targets): `process_sample`
    per sample on the host; `process_batch` where batches are gathered on the device
    (``--buffer_device accelerator``: they never go through a per-sample function)."""
    if args.buffer_device == "accelerator":
        return {"process_batch": process_batch}
    return {"process_sample": process_sample}


def train_timed(trainer: OnlineTrainer) -> tuple[Any, float]:
    """`trainer.train()`: its final state, and the wall-clock seconds it took."""
    start = time.perf_counter()
    state = trainer.train()
    return state, time.perf_counter() - start


def print_run_end(
    summary: Mapping[str, Any], opts: StudyArgs, wall: float, timer: StepTimer, shown: str
) -> None:
    """The lines a study example ends with, after its own figures: how simulation and
    training overlapped (`print_overlap`), the samples refused (`print_refused`), where
    the plot is (``summary["plot"]``, `shown` saying what it shows), and with
    ``--json`` the JSON summary, last."""
    print_overlap(summary["study"], wall, timer.seconds, opts.job_limit, timer.resumed_from)
    print_refused(summary, opts.nonfinite)
    if summary["plot"]:
        print(f"{shown}: {summary['plot']}")
    if opts.json:
        print(to_json(summary))
