"""What the study examples (`heat_pde/`, `lorenz/`, `navier_stokes/`; `heat_c/` some of
it) share: re-exported from `study_args` (which imports no torch, so that an example
parses its command line before its heavy imports), the study's options (`StudyArgs`;
`WorkerStudyArgs` with ``--worker``) and the parser of their command line
(`ShortUsageParser`: a refusal is one line of usage and the error naming the flag);
the study (or, with --external, the stream source) built from them, the steps of an
example's `main` that do not depend on its problem (`sample_or_batch`, `train_timed`,
`print_run_end`), and, re-exported here, ``--seeds`` (`run_seeds_if_asked`, from
`study_seeds`) and the timings of the JSON summary and what a run prints (from
`study_report`), and the library's `refusals_end_the_program`
(``melissa_trainer.trainer.refusals``: a refused start is one line, exit status 2).

An example imports it after adding this folder (its parent folder) to `sys.path`; a
copy of an example needs this file, study_args.py, study_report.py and study_seeds.py
one folder up.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

# the command line's (no torch): re-exported, the examples and their tests import every
# name from study_common
from study_args import (  # noqa: F401
    RESERVOIR_ONLY,
    ShortUsageParser,
    StudyArgs,
    WorkerStudyArgs,
    buffer_defaults,
)

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
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.worker_mode import DEFAULT_WORKER_BIND
from melissa_trainer.trainer.resume_choice import start_refusal

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


def check_matplotlib(plot: bool) -> None:
    """Exit now, not after training, if `plot` needs a matplotlib that is not installed:
    a usage error as a bad flag or a missing ``--model neuralop`` package is, one line
    ``PROGRAM: error: ...`` naming the extra to install and exit status 2 (it was exit
    status 1 without the program's name: a user trial, htrial12)."""
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(
                f"{Path(sys.argv[0]).name}: error: --plot needs matplotlib: "
                'pip install "melissa-trainer[examples]", or --no_plot',
                file=sys.stderr,
            )
            sys.exit(2)


def study_source(
    opts: StudyArgs,
    command: Sequence[str],
    bounds: Bounds,
    seed: int,
    rendezvous: Path,
    fields: Mapping[str, tuple[Any, Any]],
    *,
    worker_flag: str | None = None,
    final_exit_codes: tuple[int, ...] = (),
) -> tuple[Launcher | None, Source]:
    """The trainer's source: a `Study` whose Launcher runs `command` (a Python script
    and its flags) for parameter sets drawn from `bounds`, or with --external no
    launcher and a `StreamSource` waiting for NUM_SIMULATIONS solvers started by hand.
    `fields` is what every solver must declare (one schema per study: a solver
    declaring others is refused). `worker_flag`: the flag, the example's and its
    solver's alike, that turns worker mode on (None: the example has none), which the
    launcher's start-up advice names; with ``opts.worker`` (`WorkerStudyArgs`), the
    launcher runs job_limit workers, `command` and that flag (a solver that then loops
    on `serve_simulations`). `final_exit_codes`: the solver's exit codes for a failure
    that will repeat (`LauncherTuning.final_exit_codes`: given up at once, not
    restarted)."""
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
                bind=opts.receiver_bind(),
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
        tuning=_tuning(opts, final_exit_codes),
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
        bind=opts.receiver_bind(),
        fields=fields,
        nonfinite=opts.nonfinite,
        # (no stall_timeout to raise with --startup_timeout: the study's stall watchdog
        # excuses a silence while the launcher's simulations are within that allowance)
    )
    stream = StreamSource(config)
    return launcher, Study(launcher, stream)


def _tuning(opts: StudyArgs, final_exit_codes: tuple[int, ...] = ()) -> LauncherTuning:
    """The launcher's timing from the flags, and the solver's `final_exit_codes`;
    --startup_timeout unset: LauncherTuning's default, which a numeric
    --simulation_timeout leaves out."""
    timeout = opts.simulation_timeout or "auto"
    if opts.startup_timeout is None:
        return LauncherTuning(
            simulation_timeout=timeout,
            silence_floor=opts.silence_floor,
            final_exit_codes=final_exit_codes,
        )
    return LauncherTuning(
        simulation_timeout=timeout,
        silence_floor=opts.silence_floor,
        startup_timeout=opts.startup_timeout,
        final_exit_codes=final_exit_codes,
    )


def prepare_rendezvous(
    trainer: OnlineTrainer,
    opts: StudyArgs,
    rendezvous: Path,
    command: Sequence[str],
    bounds: Bounds,
    *,
    start_line: str | None = None,
) -> None:
    """Clear `rendezvous` before any receiver publishes its endpoint there, at a fresh
    start only: not on a resume, nor where the start will be refused
    (`resume_choice.start_refusal`: the earlier run's checkpoints, no resume, no
    --overwrite_output_dir); with --external, print how to start the solvers:
    `start_line`, or by default `command` (a Python solver) with its flags.

    Why not on a resume: the library takes an earlier run's files there for what they
    are (a receiver replaces its rank's file as it publishes, removes those of ranks
    beyond its world size, and a stopped or dead trainer's file is waited past:
    `stream.endpoints`), and that run's stopped files hold its stop record, which a
    closing client or a `Predictor` asking there reads; removing the folder also made a
    client listing it meanwhile fail ("cannot list"). Nor where the start will be refused:
    a user trial (htrial8) saw a plain rerun refused that had removed them."""
    fresh = not trainer.args.resume_from_checkpoint and not start_refusal(trainer)
    if trainer.is_main_process and fresh:
        shutil.rmtree(rendezvous, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    if trainer.is_main_process and opts.external:
        example = json.dumps({name: (low + high) / 2 for name, (low, high) in bounds.items()})
        if start_line is None:
            start_line = (
                f"python {' '.join(command)} --rendezvous {rendezvous} "
                f"--simulation_id ID --parameters '{example}'"
            )
        ranges = ", ".join(f"{name} in [{low:g}, {high:g}]" for name, (low, high) in bounds.items())
        print(
            f"waiting for {opts.num_simulations} simulations; start each with a distinct ID and "
            f"its own parameters ({ranges}; the line below gives the box's centre) with\n"
            f"  {start_line}",
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
