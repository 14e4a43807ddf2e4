"""Online training of a heat-equation surrogate on an ensemble of solver processes.

The launcher runs `solver.py` (a 2-D heat-equation solver, see its docstring) for
`--num_simulations` parameter sets drawn by a seeded Latin hypercube (or, with
`--sampler breed`, by the adaptive Breed sampler: each new simulation bred from those
whose data the surrogate trains worst on, or explored; with `--sampler density`, the
study's optimised Latin hypercube bent towards the parameters trained worst; with
`--sampler surrogate`, the surrogate acquisition, the guide's for the worst cases at
2-3 parameters: see `benchmarks/active_sampling.py`), at most
`--job_limit` at once; each streams its temperature field at every time step to the
trainer, which trains an MLP (5 parameters, t) -> field online, while the simulations
run, from a reservoir buffer. Validation uses `--num_validation` (32) held-out
simulations computed once in this process with the same solver, the same set whatever
`--seed` (a quarter at corners of the parameter box, the rest spread over it:
`held_out.py`). At the end it prints the validation error next to that of predicting
the mean field (the error to beat), the median, 90th percentile and largest of the
held-out simulations' own errors with how many there are (the tails: with an adaptive
`--sampler`, also how to judge it against the plain design), how much simulation and
training overlapped, and writes a PNG comparing prediction and truth; TensorBoard logs
go to OUTPUT_DIR/runs. The study's options, launcher and timings come from
`../study_common.py`, shared with the Lorenz example.

    python examples/heat_pde/train.py                        # small default, about a minute
    accelerate launch --multi_gpu --num_processes 2 examples/heat_pde/train.py
    python examples/heat_pde/train.py --grid_size 64 --num_simulations 500 --job_limit 8
    python examples/heat_pde/train.py --backend slurm ...    # each simulation a Slurm job
    python examples/heat_pde/train.py --sampler breed        # adaptive sampling
    python examples/heat_pde/train.py --sampler density      # the guide's for 6+ parameters
    python examples/heat_pde/train.py --sampler surrogate    # the guide's for 2-3 (worst cases)
    python examples/heat_pde/train.py --external             # you start the solvers yourself
    python examples/heat_pde/train.py --worker               # job_limit workers, a start-up each
    python examples/heat_pde/train.py --json                 # last line: a JSON summary
    python examples/heat_pde/train.py --mixed_precision bf16 # bf16 autocast (GPU or CPU)

Errors are mean squared errors in kelvin squared, over every grid point of every time
step of the validation simulations.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# examples/ on the path: study_common.py, and this folder as the package `heat_pde`, whose
# solver is `heat_pde.solver`: never a bare `solver`, which other examples have too
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# (HeatArgs, DEFAULTS, parser: the command line's, train.X to tests and benchmarks)
from heat_pde.cli import DEFAULTS, HeatArgs, parser  # noqa: E402, F401

if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply
    parser().parse_args_into_dataclasses()

import numpy as np  # noqa: E402
import study_common as common  # noqa: E402
import torch  # noqa: E402

# a name of this module, which benchmarks/gpu.py replaces with a timer of its own
from study_common import StepTimer  # noqa: E402

from heat_pde.held_out import ADAPTIVE, held_out_parameters, judging_hint  # noqa: E402
from heat_pde.solver import (  # noqa: E402
    PARAMETER_BOUNDS,
    PARAMETER_NAMES,
    TEMPERATURE_RANGE,
    solve,
)
from melissa_trainer import Hook, OnlineTrainer  # noqa: E402

SOLVER = Path(__file__).resolve().parent / "solver.py"
#: Affine map of kelvin onto [-1, 1], from the known range (no data needed online).
CENTER = 0.5 * (TEMPERATURE_RANGE[0] + TEMPERATURE_RANGE[1])
SCALE = 0.5 * (TEMPERATURE_RANGE[1] - TEMPERATURE_RANGE[0])


def make_process_sample(time_steps: int) -> Callable[[dict[str, np.ndarray]], Any]:
    """sample -> (inputs, targets): the parameters mapped onto [-1, 1] and sqrt(t / t_end),
    and the flattened field mapped onto [-1, 1] (float32 tensors)."""

    def process_sample(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = np.empty(len(PARAMETER_NAMES) + 1, dtype=np.float32)
        inputs[:-1] = (sample["parameters"] - CENTER) / SCALE
        # sqrt: the boundary layers grow like sqrt(alpha t), so features stay evenly spread
        inputs[-1] = np.sqrt((int(sample["time_step"]) + 1) / time_steps)
        target = (sample["temperature"].reshape(-1) - np.float32(CENTER)) / np.float32(SCALE)
        return torch.from_numpy(inputs), torch.from_numpy(target)

    return process_sample


def make_process_batch(time_steps: int) -> Callable[[Any], Any]:
    """`make_process_sample`'s mapping for a whole batch at once, bit for bit (a
    `SampleBlock` of arrays, or with ``--buffer_device accelerator`` a `DeviceBlock` of
    tensors already on the device, where it runs): a batch is then one `take` per field
    from the reservoir stored by column and a few tensor operations, where 32 calls of
    `make_process_sample` and a collate cost about four times as much on the host. The
    example trains with `make_ingest_block` instead (the features computed once per
    sample, not at each draw); benchmarks/ingest_features.py compares the two."""

    def process_batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
        fields = block.fields
        # the parameters and the time feature in their streamed precision (float64 for
        # the launcher's parameters), rounded once to float32, as make_process_sample's
        # numpy does: the same bits, so the same training
        params = torch.as_tensor(fields["parameters"])
        t = torch.as_tensor(fields["time_step"], device=params.device).to(torch.float64)
        inputs = torch.cat(
            [((params - CENTER) / SCALE).to(torch.float32),
             torch.sqrt((t + 1) / time_steps).to(torch.float32)[:, None]],
            1,
        )  # fmt: skip
        field = torch.as_tensor(fields["temperature"], device=params.device)
        target = (field.reshape(len(t), -1) - CENTER) / SCALE
        return inputs, target

    return process_batch


def make_ingest_block(time_steps: int) -> Callable[[Any], dict[str, np.ndarray]]:
    """`make_process_sample`'s features for a block of streamed samples, bit for bit,
    computed once per sample as the receiver puts it (`OnlineTrainer(ingest_block=...)`):
    ``inputs`` (the parameters mapped onto [-1, 1] and sqrt(t / t_end), float32) and
    ``target`` (the flattened field mapped onto [-1, 1], float32), and the streamed
    ``parameters``. The reservoir holds these, not the raw field (the trainer keeps
    ``simulation_id`` and ``time_step``), and a step only gathers them
    (`gather_batch`): a reservoir draws each sample about `sample_to_insert_ratio`
    times, and a per-draw `make_process_batch` computes the features that often. A
    pure function of each row, as the trainer requires."""

    def ingest_block(block: Any) -> dict[str, np.ndarray]:
        fields = block.fields
        t = fields["time_step"].astype(np.float64)
        inputs = np.empty((len(t), len(PARAMETER_NAMES) + 1), dtype=np.float32)
        # the numpy of make_process_sample, row-wise: the same operations, the same bits
        inputs[:, :-1] = (fields["parameters"] - CENTER) / SCALE
        inputs[:, -1] = np.sqrt((t + 1) / time_steps)
        field = fields["temperature"]
        target = (field.reshape(len(t), -1) - np.float32(CENTER)) / np.float32(SCALE)
        # the parameters too (40 bytes a sample): what a hook reading the batch's
        # samples finds there, as in the streamed ones
        return {"inputs": inputs, "target": target, "parameters": fields["parameters"]}

    return ingest_block


def gather_batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's `process_batch` with `make_ingest_block`'s features in the buffer: the
    batch's two fields as tensors (no copy from a host block; a `DeviceBlock`'s are on the
    device already)."""
    return torch.as_tensor(block.fields["inputs"]), torch.as_tensor(block.fields["target"])


def make_model(grid_size: int, hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(len(PARAMETER_NAMES) + 1, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, grid_size * grid_size),
    )


def validation_set(opts: HeatArgs) -> list[dict[str, np.ndarray]]:
    """Held-out simulations (`held_out_parameters`), solved here once, as samples shaped
    like the stream's (each with its own negative `simulation_id`: the trainer's
    per-simulation tails group by it)."""
    samples = []
    for i, parameters in enumerate(held_out_parameters(opts.num_validation)):
        vector = np.array([parameters[n] for n in PARAMETER_NAMES], dtype=np.float64)
        for step, temperature in enumerate(solve(parameters, opts.config)):
            samples.append(
                {
                    "temperature": temperature,
                    "time_step": np.array(step, np.int64),
                    "parameters": vector,
                    "simulation_id": np.array(-1 - i, np.int64),  # not a study id
                }
            )
    return samples


def held_out_errors(
    trainer: OnlineTrainer, samples: Sequence[dict[str, np.ndarray]], opts: HeatArgs
) -> np.ndarray:
    """Each held-out simulation's MSE in K^2 (over its grid points and time steps), in
    `validation_set`'s order, from the trained model run here on the whole set (float32,
    no autocast): the figures the worst-case line prints, computed apart from the
    trainer's validation (whose tails it should match)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    features = make_process_sample(opts.time_steps)
    inputs = torch.stack([features(s)[0] for s in samples])
    with torch.no_grad():
        device = next(model.parameters()).device
        out = model(inputs.to(device)).float().cpu().numpy().astype(np.float64)
    truth = np.stack([s["temperature"].reshape(-1) for s in samples]).astype(np.float64)
    squared = (out * SCALE + CENTER - truth) ** 2
    return squared.reshape(opts.num_validation, -1).mean(axis=1)


def plot_comparison(
    trainer: OnlineTrainer, samples: Sequence[dict[str, np.ndarray]], opts: HeatArgs, path: Path
) -> None:
    """PNG of truth, prediction and error of one validation simulation at 4 times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted({0, opts.time_steps // 4, opts.time_steps // 2, opts.time_steps - 1})
    chosen = [samples[s] for s in steps]  # the first validation simulation
    model = trainer.accelerator.unwrap_model(trainer.model)
    inputs = torch.stack([make_process_sample(opts.time_steps)(s)[0] for s in chosen])
    with torch.no_grad():
        device = next(model.parameters()).device
        out = model(inputs.to(device)).float().cpu().numpy()
    n = opts.grid_size
    truth = np.stack([s["temperature"] for s in chosen])
    prediction = out.reshape(-1, n, n) * SCALE + CENTER
    error = prediction - truth
    fig, axes = plt.subplots(
        3, len(steps), figsize=(3 * len(steps) + 1, 8), squeeze=False, layout="constrained"
    )
    low, high = TEMPERATURE_RANGE
    bound = max(float(np.abs(error).max()), 1e-6)
    rows = [("truth (K)", truth, "inferno", low, high),
            ("prediction (K)", prediction, "inferno", low, high),
            ("error (K)", error, "coolwarm", -bound, bound)]  # fmt: skip
    for r, (label, images, cmap, vmin, vmax) in enumerate(rows):
        for c, step in enumerate(steps):
            ax = axes[r][c]
            im = ax.imshow(images[c], origin="lower", cmap=cmap, vmin=vmin, vmax=vmax)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"t = {(step + 1) * opts.dt:.3g}")
            if c == 0:
                ax.set_ylabel(label)
        fig.colorbar(im, ax=list(axes[r]), shrink=0.9)
    named = zip(PARAMETER_NAMES, chosen[0]["parameters"], strict=True)
    values = ", ".join(f"{name[2:]} {value:.0f}" for name, value in named)
    fig.suptitle(f"held-out simulation ({values} K)")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None, hooks: Sequence[Hook] = ()) -> dict[str, Any]:
    """Run the example with the command line `argv` (None: `sys.argv`) and return its
    summary (what ``--json`` prints).
    `hooks`: your own `Hook` instances (a `SampleLedger`, say), given to the trainer
    after the example's own, so that no one has to patch the example to add one."""
    args, opts = parser(argv).parse_args_into_dataclasses(argv)
    report = common.run_seeds_if_asked(Path(__file__), argv, args, opts)
    if report is not None:  # --seeds: the whole study once per seed, each in its own process
        return report
    common.check_matplotlib(opts.plot)
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
        fields={"temperature": ((n, n), "float32")},  # what solver.py declares
        worker_flag="--worker",  # solver.py's, and this example's
    )

    common.leave_cores_to_simulations(opts)
    torch.manual_seed(args.seed)
    model = make_model(opts.grid_size, opts.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
    validation = validation_set(opts)
    timer = StepTimer()
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=source,
        # features once per sample, as the receiver puts it; a step gathers them
        ingest_block=make_ingest_block(opts.time_steps),
        process_batch=gather_batch,
        eval_dataset=validation,
        hooks=[timer, *hooks],
    )
    common.prepare_rendezvous(trainer, opts, rendezvous, solver_command, PARAMETER_BOUNDS)

    state, wall = common.train_timed(trainer)
    val_mse = common.final_eval_loss(trainer) * SCALE**2
    tails = common.final_eval_tails(trainer, SCALE**2)  # the held-out simulations' worst
    truth = np.stack([s["temperature"] for s in validation]).astype(np.float64)
    mean_field_mse = float(((truth - truth.mean(axis=0)) ** 2).mean())
    errors = held_out_errors(trainer, validation, opts)
    summary: dict[str, Any] = {
        "val_mse": val_mse,
        "val_mse_p99": tails.get("p99"),
        "val_mse_max": tails.get("max"),
        "val_simulations": opts.num_validation,
        "val_mse_per_simulation": [float(e) for e in errors],
        "mean_field_mse": mean_field_mse,
        **common.run_summary(
            trainer, launcher, timer.seconds, wall, opts.job_limit, timer.resumed_from
        ),
        "sampler": common.adaptive_summary(launcher),
    }
    if not trainer.is_main_process:
        return summary
    if opts.plot:
        png = output_dir / "heat_pde_validation.png"
        plot_comparison(trainer, validation, opts, png)
        summary["plot"] = str(png)
    print(
        f"validation MSE {val_mse:.4g} K^2 (RMSE {val_mse**0.5:.3g} K) vs predicting the "
        f"mean field {mean_field_mse:.4g} K^2: {common.compared(mean_field_mse, val_mse)}, "
        f"after {state.global_step} steps on {state.total_samples_seen} samples"
    )
    worst = int(np.argmax(errors))
    at = ", ".join(f"{n[2:]} {v:.0f}" for n, v in zip(PARAMETER_NAMES, validation[
        worst * opts.time_steps]["parameters"], strict=True))  # fmt: skip
    print(
        f"per held-out simulation (of {opts.num_validation}, the same set whatever --seed): "
        f"median {np.median(errors):.4g} K^2, 90th percentile "
        f"{np.percentile(errors, 90):.4g} K^2, worst {errors[worst]:.4g} K^2 ({at} K)"
        + ("" if not tails else f"; the trainer's 99th percentile {tails['p99']:.4g} K^2")
    )
    if opts.sampler in ADAPTIVE:
        print(judging_hint(opts.sampler, args.seed, opts.num_simulations))
    # (an adaptive sampler's draws: the study's account says them, `sampler_line`)
    common.print_run_end(summary, opts, wall, timer, "prediction vs truth")
    return summary


if __name__ == "__main__":
    with common.refusals_end_the_program():
        main()
