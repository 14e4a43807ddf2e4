"""Online training of a heat-equation surrogate on compiled MPI solvers (C or Fortran).

The launcher runs `heat_c` (heat.c) or `heat_fortran` (heat.f90), built by this
folder's CMakeLists.txt, as `mpiexec -n 2` jobs for `--num_simulations` parameter sets
drawn by a seeded Latin hypercube, at most `--job_limit` at once. Each rank streams its
rows of the temperature field at every time step through the C client (or its Fortran
module); the trainer reassembles the field and trains an MLP (5 parameters, t) ->
field online. Validation uses a few held-out simulations computed here by
`reference.py`, the same scheme in numpy (bit for bit the solvers' fields). The study's
options and timings come from `../study_common.py`, as in the Python heat example.

    cmake -S examples/heat_c -B examples/heat_c/build -DCMAKE_PREFIX_PATH=PREFIX
    cmake --build examples/heat_c/build
    python examples/heat_c/train.py                       # the C solver
    python examples/heat_c/train.py --solver fortran      # the Fortran one
    python examples/heat_c/train.py --json                # last line: a JSON summary
    python examples/heat_c/train.py --seeds 3             # 3 studies: the error's spread

Errors are mean squared errors in kelvin squared over every grid point of every time
step of the validation simulations.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # reference.py, heat_c_cli.py
sys.path.insert(1, str(HERE.parent))  # study_common.py
# (HeatCArgs, DEFAULTS, parser, SOLVERS: the command line's, train.X to tests)
from heat_c_cli import DEFAULTS, SOLVERS, HeatCArgs, parser  # noqa: E402, F401

if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply
    parser().parse_args_into_dataclasses()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from reference import PARAMETER_BOUNDS, PARAMETER_NAMES, TEMPERATURE_RANGE, solve  # noqa: E402
from study_common import (  # noqa: E402
    StepTimer,
    final_eval_loss,
    prepare_rendezvous,
    print_overlap,
    refusals_end_the_program,
    run_seeds_if_asked,
    run_summary,
    sample_or_batch,
    train_timed,
)

from melissa_trainer import (  # noqa: E402
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
)
from melissa_trainer.common.json_output import to_json  # noqa: E402
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler  # noqa: E402
from melissa_trainer.launcher.backends.mpiexec import MpiexecBackend  # noqa: E402

CENTER = 0.5 * (TEMPERATURE_RANGE[0] + TEMPERATURE_RANGE[1])
SCALE = 0.5 * (TEMPERATURE_RANGE[1] - TEMPERATURE_RANGE[0])


def process_sample(time_steps: int) -> Any:
    """sample -> (inputs, targets): the parameters mapped onto [-1, 1] and sqrt(t / t_end),
    and the flattened field mapped onto [-1, 1] (float32 tensors)."""

    def process(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = np.empty(len(PARAMETER_NAMES) + 1, dtype=np.float32)
        inputs[:-1] = (sample["parameters"] - CENTER) / SCALE
        inputs[-1] = np.sqrt((int(sample["time_step"]) + 1) / time_steps)
        target = (sample["temperature"].reshape(-1) - np.float32(CENTER)) / np.float32(SCALE)
        return torch.from_numpy(inputs), torch.from_numpy(target)

    return process


def process_batch(time_steps: int) -> Any:
    """`process_sample`'s mapping for a whole batch at once: a `SampleBlock` of arrays,
    or with ``--buffer_device accelerator`` a `DeviceBlock` of tensors on the device
    (batches gathered there never go through a per-sample function)."""

    def process(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
        fields = block.fields
        params = torch.as_tensor(fields["parameters"], dtype=torch.float32)
        t = torch.as_tensor(fields["time_step"], device=params.device).to(torch.float32)
        time = torch.sqrt((t + 1) / time_steps)[:, None]
        inputs = torch.cat([(params - CENTER) / SCALE, time], 1)
        field = torch.as_tensor(fields["temperature"], device=params.device)
        return inputs, (field.reshape(len(t), -1) - CENTER) / SCALE

    return process


def validation_set(opts: HeatCArgs, seed: int) -> list[dict[str, np.ndarray]]:
    """Held-out simulations, solved here by `reference.solve`, shaped like the stream's."""
    sampler = make_sampler("uniform", PARAMETER_BOUNDS, seed=seed)
    samples = []
    for i in range(opts.num_validation):
        parameters = sampler.draw()
        vector = np.array([parameters[n] for n in PARAMETER_NAMES], dtype=np.float64)
        fields = solve(parameters, opts.nx, opts.ny, opts.time_steps, opts.r)
        for step, temperature in enumerate(fields):
            samples.append(
                {
                    "temperature": temperature,
                    "time_step": np.array(step, np.int64),
                    "parameters": vector,
                    "simulation_id": np.array(-1 - i, np.int64),  # not a study id
                }
            )
    return samples


def make_source(opts: HeatCArgs, seed: int, rendezvous: Path) -> tuple[Launcher | None, Any]:
    """A `Study` whose launcher runs the solver as MPI jobs, or with --external a
    `StreamSource` waiting for NUM_SIMULATIONS solvers started by hand."""
    fields = {"temperature": ((opts.ny, opts.nx), "float32")}  # what the solvers declare
    config = ReceiverConfig(
        rendezvous_dir=rendezvous,
        bind=opts.receiver_bind(),
        fields=fields,
        # A Study tells the stream how many simulations to expect; by hand, we do.
        expected_simulations=opts.num_simulations if opts.external else None,
    )
    if opts.external:
        return None, StreamSource(config)
    if opts.backend != "mpiexec":
        sys.exit(f"--backend {opts.backend}: this example runs its solvers with mpiexec")
    launcher = Launcher(
        simulation=opts.command(),
        sampler=make_sampler(opts.sampler, PARAMETER_BOUNDS, seed=seed),
        n_simulations=opts.num_simulations,
        job_limit=opts.job_limit,
        backend=MpiexecBackend(mpiexec=opts.mpiexec),
        ranks_per_simulation=opts.ranks,
        tuning=LauncherTuning(simulation_timeout=opts.simulation_timeout or "auto"),
    )
    return launcher, Study(launcher, StreamSource(config))


def main(argv: list[str] | None = None, hooks: Sequence[Hook] = ()) -> dict[str, Any]:
    """Run the example with the command line `argv` (None: `sys.argv`) and return its
    summary (what ``--json`` prints).
    `hooks`: your own `Hook` instances (a `SampleLedger`, say), given to the trainer
    after the example's own, so that no one has to patch the example to add one."""
    args, opts = parser(argv).parse_args_into_dataclasses(argv)
    report = run_seeds_if_asked(Path(__file__), argv, args, opts, plots=False)  # (no --plot)
    if report is not None:  # --seeds: the whole study once per seed, each in its own process
        return report
    output_dir = Path(args.output_dir)
    rendezvous = output_dir / "rendezvous"
    launcher, source = make_source(opts, args.seed, rendezvous)
    if "OMP_NUM_THREADS" not in os.environ:  # leave the solvers' ranks their cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - opts.job_limit * opts.ranks))
    torch.manual_seed(args.seed)
    hidden, n = opts.hidden, opts.nx * opts.ny
    model = torch.nn.Sequential(
        torch.nn.Linear(len(PARAMETER_NAMES) + 1, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, n),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
    validation = validation_set(opts, seed=args.seed + 1)
    timer = StepTimer()
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=source,
        **sample_or_batch(args, process_sample(opts.time_steps), process_batch(opts.time_steps)),
        eval_dataset=validation,
        hooks=[timer, *hooks],
    )
    prepare_rendezvous(
        trainer,
        opts,
        rendezvous,
        opts.command(),
        PARAMETER_BOUNDS,
        start_line=(
            f"MELISSA_TRAINER_SIMULATION_ID=ID MELISSA_TRAINER_RENDEZVOUS={rendezvous} "
            "MELISSA_TRAINER_PARAMETERS='"
            + json.dumps({name: 300.0 for name in PARAMETER_NAMES})
            + f"' mpiexec -n {opts.ranks} {' '.join(opts.command())}"
        ),
    )

    state, wall = train_timed(trainer)
    val_mse = final_eval_loss(trainer) * SCALE**2
    truth = np.stack([s["temperature"] for s in validation]).astype(np.float64)
    mean_field_mse = float(((truth - truth.mean(axis=0)) ** 2).mean())
    summary: dict[str, Any] = {
        "solver": opts.solver,
        "val_mse": val_mse,
        "mean_field_mse": mean_field_mse,
        **run_summary(trainer, launcher, timer.seconds, wall, opts.job_limit, timer.resumed_from),
    }
    if not trainer.is_main_process:
        return summary
    print(
        f"{opts.solver} solver, {opts.ranks} ranks each: validation MSE {val_mse:.4g} K^2 "
        f"(RMSE {val_mse**0.5:.3g} K) vs predicting the mean field {mean_field_mse:.4g} K^2, "
        f"after {state.global_step} steps on {state.total_samples_seen} samples"
    )
    print_overlap(summary["study"], wall, timer.seconds, opts.job_limit, timer.resumed_from)
    if opts.json:
        print(to_json(summary))
    return summary


if __name__ == "__main__":
    with refusals_end_the_program():
        main()
