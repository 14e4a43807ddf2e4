"""Online training of a neural operator on 2-D Navier–Stokes flows from an ensemble of solvers.

The launcher runs `solver.py` (a pseudo-spectral vorticity solver on the periodic square,
see its docstring) for `--num_simulations` parameter sets (viscosity, forcing amplitude
and wavenumber) drawn by a seeded Latin hypercube, at most `--job_limit` at once; each
starts from its own random vorticity field and streams the field every `--interval` time
units. A Fourier neural operator (`--model fno`, the default; `unet` a small U-Net;
`neuralop` the `neuraloperator` package's FNO, an extra) learns, online, from a
reservoir buffer, the map

    (initial vorticity omega(0), forcing, viscosity, t)  ->  omega(t)

for the `--time_steps` times t = interval, 2 interval, ...: a direct map rather than an
autoregressive rollout, so that one sample is one training example (no error compounds
over a rollout) and the data the stream delivers are used as they come. Its inputs are
four channels on the grid: omega(0), the forcing field, log(nu) and t (each constant
channel mapped onto [-1, 1]). Validation uses a few held-out simulations (initial fields
from seeds no study simulation has) computed once in this process with the same solver.
At the end it prints the validation error next to two baselines: predicting the mean
field (the validation fields' average at each grid point) and persistence (predicting
omega(0), the field the model is given), writes a PNG comparing prediction and truth;
TensorBoard logs go to OUTPUT_DIR/runs. The flags that rebuild the model (--model and
its own, the grid and the times of its inputs) go to OUTPUT_DIR/checkpoints/
model_flags.json, which a resume is checked against and `model_flags.load_trained`
rebuilds the trained model from. The study's options, launcher and timings come
from `../study_common.py`, shared with the other study examples.

    python examples/navier_stokes/train.py                    # 64^2: 60-125 CPU-s in all
    accelerate launch --multi_gpu --num_processes 2 examples/navier_stokes/train.py \\
        --output_dir outputs/navier_stokes_2ranks             # each run its own folder
    python examples/navier_stokes/train.py --grid_size 256 --dt 0.00625 --width 32 \\
        --num_simulations 512 --job_limit 12 --batch_size 16 --mixed_precision bf16 \\
        --buffer_device accelerator --buffer_size 5120 --watermark 256 \\
        --output_dir outputs/navier_stokes_256                # on a GPU
    python examples/navier_stokes/train.py --model unet --output_dir outputs/ns_unet
    python examples/navier_stokes/train.py --worker --output_dir outputs/ns_worker
                                                              # job_limit workers, a start-up each
    python examples/navier_stokes/train.py --json --output_dir outputs/ns_json

The validation MSE is the vorticity's mean squared error over every grid point of every
time step of the validation simulations; beside it, for the model and both baselines,
the relative L2 error (per field ||pred - true|| / ||true||, averaged) pooled and by
lead time (`errors.py`; the JSON summary's ``by_lead_time`` has every time step).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# examples/ on the path: study_common.py, and this folder as the package `navier_stokes`,
# so that its modules are `navier_stokes.solver` and `navier_stokes.models`, never a bare
# `solver` that another example's module of that name (heat_pde, lorenz) would clash with
# in a process that imports both (a test, a benchmark)
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# (DEFAULTS, FlowArgs, parser: the command line's, train.X to tests and benchmarks)
from navier_stokes.cli import DEFAULTS, FlowArgs, parser  # noqa: E402, F401

if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply
    parser().parse_args_into_dataclasses()

import numpy as np  # noqa: E402
import study_common as common  # noqa: E402
import torch  # noqa: E402

# a name of this module, which benchmarks/gpu_fno_busy.py replaces with a timer of its own
from study_common import StepTimer  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer  # noqa: E402
from melissa_trainer.config.reading import ConfigError  # noqa: E402
from navier_stokes.errors import field_errors, lead_time_table, mse_tails  # noqa: E402
from navier_stokes.model_flags import (  # noqa: E402
    RecordModelFlags,
    check_resume,
    checkpoint_folder,
    record_of,
)
from navier_stokes.models import make_model  # noqa: E402
from navier_stokes.plot import plot_comparison, predict  # noqa: E402
from navier_stokes.solver import (  # noqa: E402
    PARAMETER_BOUNDS,
    PARAMETER_NAMES,
    UNSTABLE_EXIT_CODE,
    Unstable,
    initial_vorticity,
    solve,
)

SOLVER = Path(__file__).resolve().parent / "solver.py"
#: input channels: omega(0), forcing, log(nu), t
CHANNELS = 4
#: validation simulations' seeds start here: held out from any study of fewer simulations
#: (a study simulation's seed is its id, from 0)
VALIDATION_SEED = 1_000_000
_LOG_NU = tuple(math.log(v) for v in PARAMETER_BOUNDS["nu"])
_AMPLITUDE_MAX = PARAMETER_BOUNDS["amplitude"][1]


def features(
    parameters: torch.Tensor, time_step: torch.Tensor, initial: torch.Tensor, time_steps: int
) -> torch.Tensor:
    """The model's inputs for a batch: (batch, CHANNELS, n, n) float32 on `initial`'s
    device, from parameters (batch, 3) in `PARAMETER_NAMES` order, time steps (batch,)
    and initial fields (batch, n, n). Channels: omega(0); the forcing field
    (amplitude / its maximum) * cos(k y), k = floor(wavenumber), as the solver applies
    it; log(nu) and t = (time step + 1) / time_steps, each mapped onto [-1, 1]."""
    initial = initial.to(torch.float32)
    device, (b, n) = initial.device, initial.shape[:2]
    p = parameters.to(device=device, dtype=torch.float32)
    y = torch.arange(n, device=device, dtype=torch.float32) * (2 * math.pi / n)
    force = (p[:, 1:2] / _AMPLITUDE_MAX) * torch.cos(torch.floor(p[:, 2:3]) * y[None, :])
    low, high = _LOG_NU
    log_nu = 2 * (torch.log(p[:, 0]) - low) / (high - low) - 1
    t = 2 * (time_step.to(device=device, dtype=torch.float32) + 1) / time_steps - 1
    return torch.stack(
        [
            initial,
            force[:, :, None].expand(b, n, n),
            log_nu[:, None, None].expand(b, n, n),
            t[:, None, None].expand(b, n, n),
        ],
        1,
    )


def make_process_batch(time_steps: int) -> Callable[[Any], tuple[torch.Tensor, torch.Tensor]]:
    """block -> (inputs, targets) for a whole batch (a `SampleBlock` of arrays, or with
    ``--buffer_device accelerator`` a `DeviceBlock` of tensors on the device, where it
    runs): targets (batch, 1, n, n), omega(t)."""

    def process_batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
        f = block.fields
        initial = torch.as_tensor(f["initial"])
        inputs = features(
            torch.as_tensor(f["parameters"]), torch.as_tensor(f["time_step"]), initial, time_steps
        )
        target = torch.as_tensor(f["vorticity"], device=initial.device).to(torch.float32)
        return inputs, target[:, None]

    return process_batch


def make_process_sample(time_steps: int) -> Callable[[Mapping[str, Any]], Any]:
    """sample -> (inputs (CHANNELS, n, n), target (1, n, n)): `make_process_batch`'s
    mapping for one sample."""

    def process_sample(sample: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = features(
            torch.as_tensor(np.asarray(sample["parameters"]))[None],
            torch.as_tensor(np.asarray(sample["time_step"]))[None],
            torch.from_numpy(np.asarray(sample["initial"]))[None],
            time_steps,
        )
        return inputs[0], torch.from_numpy(np.asarray(sample["vorticity"]))[None].float()

    return process_sample


def validation_set(opts: FlowArgs, seed: int) -> list[dict[str, np.ndarray]]:
    """Held-out simulations, solved here once, as samples shaped like the stream's: the
    parameters from a uniform draw of `seed`, the initial fields from seeds
    VALIDATION_SEED + i (no study simulation has them)."""
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(opts.num_validation):
        vector = np.array([rng.uniform(*PARAMETER_BOUNDS[n]) for n in PARAMETER_NAMES])
        parameters = dict(zip(PARAMETER_NAMES, vector.tolist(), strict=True))
        initial = initial_vorticity(opts.grid_size, VALIDATION_SEED + i).astype(np.float32)
        for step, vorticity in enumerate(solve(parameters, opts.config, VALIDATION_SEED + i)):
            samples.append(
                {
                    "vorticity": vorticity,
                    "initial": initial,
                    "time_step": np.array(step, np.int64),
                    "parameters": vector,
                    "simulation_id": np.array(-1 - i, np.int64),  # not a study id
                }
            )
    return samples


def baselines(samples: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """The errors to beat on `samples`: the mean field (each grid point's average over
    the samples) and persistence (omega(t) predicted as omega(0))."""
    truth = np.stack([s["vorticity"] for s in samples]).astype(np.float64)
    initial = np.stack([s["initial"] for s in samples]).astype(np.float64)
    return {
        "mean_field_mse": float(((truth - truth.mean(axis=0)) ** 2).mean()),
        "persistence_mse": float(((truth - initial) ** 2).mean()),
    }


def main(
    argv: list[str] | None = None,
    model: torch.nn.Module | None = None,
    optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer] | None = None,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    hooks: Sequence[Hook] = (),
) -> dict[str, Any]:
    """Run the example with the command line `argv` (None: `sys.argv`) and return its
    summary (what ``--json`` prints).

    `model`: your own surrogate instead of the one ``--model`` builds (``--model``,
    ``--width``, ``--modes`` and ``--layers`` are then ignored; its class name is what
    ``model_flags.json`` records and a resume is checked against): a module mapping inputs
    of shape (batch, CHANNELS, n, n) to (batch, 1, n, n) (the first step refuses
    another shape, naming both). `optimizer`: ``optimizer(model) -> Optimizer`` instead
    of ``torch.optim.Adam(model.parameters(), lr=--learning_rate)``, e.g. a fused Adam.
    `loss_fn`: ``loss_fn(outputs, targets) -> scalar tensor`` instead of the mean
    squared error, given to ``OnlineTrainer(loss_fn=...)``: training and the trainer's
    validation (``eval_loss``, the summary's ``val_loss``) use it; taking
    ``reduction="none"`` as torch's losses do gives that validation per-simulation
    tails. The summary's ``val_mse`` (and its tails) is then the MSE of the final
    model's predictions, computed here, so that it stays comparable with the baselines.
    `hooks`: your own `Hook` instances (a `SampleLedger`, say), given to the trainer
    after the example's own (its step timer), so they see every event it sees.
    docs/how-to/neural-operator.md, "Your own model"."""
    args, opts = parser(argv).parse_args_into_dataclasses(argv)
    report = common.run_seeds_if_asked(Path(__file__), argv, args, opts)
    if report is not None:  # --seeds: the whole study once per seed, each in its own process
        return report
    common.check_matplotlib(opts.plot)
    own_model = model is not None
    try:  # the model first: a missing package is a usage error, before anything starts
        torch.manual_seed(args.seed)
        if model is None:
            model = make_model(opts.model, CHANNELS, opts.width, opts.modes, opts.layers)
            model_name = opts.model
        else:
            model_name = type(model).__name__
    except ValueError as exc:  # a usage error, as a bad flag is (exit status 2)
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    # the flags that rebuild the model, recorded beside its checkpoints; a resume that
    # says otherwise is refused before anything starts (a ConfigError: exit status 2)
    record = record_of(opts, model_name, own_model, CHANNELS)
    check_resume(args.resume_from_checkpoint, checkpoint_folder(args.output_dir), record)
    output_dir = Path(args.output_dir)
    rendezvous = output_dir / "rendezvous"
    solver_command = [str(SOLVER), *opts.config.argv()]
    n = opts.grid_size
    launcher, source = common.study_source(
        opts,
        solver_command,
        PARAMETER_BOUNDS,
        seed=args.seed,
        rendezvous=rendezvous,
        # what solver.py declares
        fields={"vorticity": ((n, n), "float32"), "initial": ((n, n), "float32")},
        worker_flag="--worker",  # solver.py's, and this example's
        # a blow-up (too large a --dt) repeats with the same parameters: not restarted
        final_exit_codes=(UNSTABLE_EXIT_CODE,),
    )

    common.leave_cores_to_simulations(opts)
    optimizer_of_model = (
        torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
        if optimizer is None
        else optimizer(model)
    )
    try:
        validation = validation_set(opts, seed=args.seed + 1)
    except Unstable as exc:  # --dt too large for these ranges: a refusal, before any run
        # (a ConfigError: refusals_end_the_program says it once, on rank 0, exit status 2)
        raise ConfigError(f"a held-out simulation: {exc}") from exc
    timer = StepTimer()
    trainer = OnlineTrainer(
        model,
        args,
        optimizer_of_model,
        train_source=source,
        **common.sample_or_batch(
            args, make_process_sample(opts.time_steps), make_process_batch(opts.time_steps)
        ),
        loss_fn=loss_fn,
        eval_dataset=validation,
        hooks=[timer, RecordModelFlags(record), *hooks],
    )
    common.prepare_rendezvous(trainer, opts, rendezvous, solver_command, PARAMETER_BOUNDS)

    state, wall = common.train_timed(trainer)
    mapping = make_process_sample(opts.time_steps)
    # every rank: each holds the validation set and the same model after the last step
    predictions = predict(trainer, validation, mapping)
    errors = field_errors(validation, predictions, opts.interval)
    val_loss = common.final_eval_loss(trainer)
    tails = common.final_eval_tails(trainer)  # the held-out simulations' worst
    if loss_fn is None:
        val_mse = val_loss  # the trainer's validation loss is the MSE
    else:  # the trainer's is the user's loss: the MSE of the final model's predictions
        val_mse = errors["val_mse_of_predictions"]
        tails = mse_tails(validation, predictions)
    summary: dict[str, Any] = {
        "val_mse": val_mse,
        "val_mse_p99": tails.get("p99"),
        "val_mse_max": tails.get("max"),
        **({} if loss_fn is None else {"val_loss": val_loss}),
        **baselines(validation),
        **errors,
        "model": model_name,
        "grid_size": n,
        **common.run_summary(
            trainer, launcher, timer.seconds, wall, opts.job_limit, timer.resumed_from
        ),
    }
    if not trainer.is_main_process:
        return summary
    if opts.plot:
        png = output_dir / "navier_stokes_validation.png"
        plot_comparison(trainer, validation, opts, png, model_name, mapping)
        summary["plot"] = str(png)
    mean_field, persistence = summary["mean_field_mse"], summary["persistence_mse"]
    print(
        f"validation MSE {val_mse:.4g} ({model_name}, {n}^2) vs predicting the mean field "
        f"{mean_field:.4g} ({common.compared(mean_field, val_mse)}) and persistence "
        f"{persistence:.4g} ({common.compared(persistence, val_mse)}), after "
        f"{state.global_step} steps on {state.total_samples_seen} samples"
    )
    if loss_fn is not None:
        name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
        print(f"trained on loss_fn {name}: its validation value {val_loss:.4g}")
    if tails:
        print(
            f"per held-out simulation ({opts.num_validation}): 99th percentile "
            f"{tails['p99']:.4g}, worst {tails['max']:.4g}"
        )
    print("\n".join(lead_time_table(errors, model_name, opts.time_steps)))
    common.print_run_end(summary, opts, wall, timer, "prediction vs truth")
    return summary


if __name__ == "__main__":
    with common.refusals_end_the_program():
        main()
