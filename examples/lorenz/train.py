"""Online training of an autoregressive Lorenz-63 surrogate on an ensemble of trajectories.

The launcher runs `solver.py` (a Lorenz-63 RK4 integrator, see its docstring) for
`--num_simulations` parameter sets (sigma, rho, beta and the initial state) drawn by a
seeded Latin hypercube, at most `--job_limit` at once. Each streams one transition
(state, next state) per time step; an MLP learns (sigma, rho, beta, state) -> the
increment to the next state, online, from a reservoir buffer. Validation rolls the
surrogate out for `--horizon` steps from points along held-out trajectories (computed
once in this process with the same integrator) and compares it with persistence
(predicting that the state does not change), the baseline to beat. It also prints how
much simulation and training overlapped; TensorBoard logs go to OUTPUT_DIR/runs. The
study's options, launcher and timings come from `../study_common.py`, shared with the
heat-equation example.

    python examples/lorenz/train.py                          # small default, under a minute
    accelerate launch --multi_gpu --num_processes 2 examples/lorenz/train.py
    python examples/lorenz/train.py --num_simulations 1000 --job_limit 8 --horizon 100
    python examples/lorenz/train.py --json                   # last line: a JSON summary
    python examples/lorenz/train.py --worker                 # job_limit workers, a start-up each

Errors are mean squared errors of the state (x, y, z), averaged over the components,
the horizon's steps and the starting points.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# examples/ on the path: study_common.py, and this folder as the package `lorenz`, whose
# solver is `lorenz.solver`: never a bare `solver`, which other examples have too
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# (LorenzArgs, DEFAULTS, parser: the command line's, train.X to tests and benchmarks)
from lorenz.cli import DEFAULTS, LorenzArgs, parser  # noqa: E402, F401

if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply
    parser().parse_args_into_dataclasses()

import numpy as np  # noqa: E402
import study_common as common  # noqa: E402
import torch  # noqa: E402

from lorenz.solver import PARAMETER_BOUNDS, PARAMETER_NAMES, trajectory  # noqa: E402
from melissa_trainer import Hook, OnlineTrainer  # noqa: E402
from melissa_trainer.launcher import make_sampler  # noqa: E402

SOLVER = Path(__file__).resolve().parent / "solver.py"
#: The coefficients the dynamics depend on (the initial state does not enter them).
COEFFICIENTS = ("sigma", "rho", "beta")
_LOW = np.array([PARAMETER_BOUNDS[n][0] for n in COEFFICIENTS])
_HIGH = np.array([PARAMETER_BOUNDS[n][1] for n in COEFFICIENTS])
#: Normalisation from what is known of the attractor at these coefficients (not from
#: data): states lie around (0, 0, 25) within about +-25, and |dS/dt| is typically 60.
STATE_CENTER = np.array([0.0, 0.0, 25.0])
STATE_SCALE = 10.0
RATE_SCALE = 60.0


def model_inputs(coefficients: np.ndarray, state: np.ndarray) -> np.ndarray:
    """float32 (..., 6): coefficients mapped onto [-1, 1], then the normalised state."""
    scaled = 2.0 * (coefficients - _LOW) / (_HIGH - _LOW) - 1.0
    return np.concatenate([scaled, (state - STATE_CENTER) / STATE_SCALE], axis=-1).astype(
        np.float32
    )


class Transitions:
    """`process_sample`: sample -> (inputs, the normalised rate (next - state) / dt)."""

    def __init__(self, dt: float) -> None:
        self.dt = dt

    def __call__(self, sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        state, next_state = sample["transition"]
        inputs = model_inputs(sample["parameters"][: len(COEFFICIENTS)], state)
        rate = (next_state - state) / (self.dt * RATE_SCALE)
        return torch.from_numpy(inputs), torch.from_numpy(rate.astype(np.float32))

    def batch(self, block: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The same for a whole batch at once: a `SampleBlock` of arrays, or with
        ``--buffer_device accelerator`` a `DeviceBlock` of tensors on the device
        (batches gathered there never go through a per-sample function)."""
        fields = block.fields
        transition = torch.as_tensor(fields["transition"]).to(torch.float64)
        device = transition.device
        state, next_state = transition[:, 0], transition[:, 1]
        low, high = (torch.as_tensor(b, device=device) for b in (_LOW, _HIGH))
        coefficients = torch.as_tensor(fields["parameters"], device=device)[:, : len(low)]
        scaled = 2.0 * (coefficients.to(torch.float64) - low) / (high - low) - 1.0
        center = torch.as_tensor(STATE_CENTER, device=device)
        inputs = torch.cat([scaled, (state - center) / STATE_SCALE], 1)
        rate = (next_state - state) / (self.dt * RATE_SCALE)
        return inputs.to(torch.float32), rate.to(torch.float32)


def make_model(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(len(COEFFICIENTS) + 3, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, 3),
    )


def held_out(opts: LorenzArgs, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(parameters in PARAMETER_NAMES order, states (time_steps + 1, 3)) per trajectory."""
    sampler = make_sampler("uniform", PARAMETER_BOUNDS, seed=seed)
    out = []
    for _ in range(opts.num_validation):
        parameters = sampler.draw()
        vector = np.array([parameters[n] for n in PARAMETER_NAMES])
        out.append((vector, trajectory(parameters, opts.time_steps, opts.dt)))
    return out


def one_step_samples(trajectories: list[tuple[np.ndarray, np.ndarray]]) -> list[dict]:
    """The held-out transitions as samples shaped like the stream's (the eval_dataset)."""
    return [
        {
            "transition": states[k : k + 2],
            "time_step": np.array(k, np.int64),
            "parameters": parameters,
            "simulation_id": np.array(-1 - i, np.int64),  # not a study id
        }
        for i, (parameters, states) in enumerate(trajectories)
        for k in range(len(states) - 1)
    ]


def rollouts(
    model: torch.nn.Module, trajectories: list[tuple[np.ndarray, np.ndarray]], opts: LorenzArgs
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roll the model out `horizon` steps from every `horizon`-th state of each trajectory.

    Returns the starting states (starts, 3) and the predicted and true states that follow
    them (starts, horizon, 3), float64.
    """
    h = opts.horizon
    starts = [(i, s) for i, (_, states) in enumerate(trajectories)
              for s in range(0, len(states) - h, h)]  # fmt: skip
    coefficients = np.stack([trajectories[i][0][: len(COEFFICIENTS)] for i, _ in starts])
    state = first = np.stack([trajectories[i][1][s] for i, s in starts])
    truth = np.stack([trajectories[i][1][s + 1 : s + 1 + h] for i, s in starts])
    predicted = np.empty_like(truth)
    device = next(model.parameters()).device
    with torch.no_grad():
        for k in range(h):
            inputs = torch.from_numpy(model_inputs(coefficients, state)).to(device)
            rate = model(inputs).double().cpu().numpy()
            state = state + rate * (opts.dt * RATE_SCALE)
            predicted[:, k] = state
    return first, predicted, truth


def plot_rollouts(
    trajectories: list[tuple[np.ndarray, np.ndarray]],
    predicted: np.ndarray,
    opts: LorenzArgs,
    path: Path,
) -> None:
    """PNG of the first held-out trajectory and the rollouts started along it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    states = trajectories[0][1]
    h = opts.horizon
    windows = min(len(range(0, len(states) - h, h)), max(1, 500 // h))
    t = np.arange(len(states)) * opts.dt
    fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True, layout="constrained")
    for c, (ax, name) in enumerate(zip(axes, "xyz", strict=True)):
        end = windows * h + 1
        ax.plot(t[:end], states[:end, c], color="black", lw=1.2, label="truth")
        for w in range(windows):
            span = t[w * h + 1 : (w + 1) * h + 1]
            label = f"surrogate, {h}-step rollouts" if w == 0 else None
            ax.plot(span, predicted[w, :, c], color="tab:orange", lw=1.2, ls="--", label=label)
        ax.set_ylabel(name)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("t")
    named = zip(PARAMETER_NAMES, trajectories[0][0], strict=True)
    values = ", ".join(f"{name} {value:.3g}" for name, value in named)
    fig.suptitle(f"held-out trajectory ({values})")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None, hooks: Sequence[Hook] = ()) -> dict[str, Any]:
    """Run the example with the command line `argv` (None: `sys.argv`) and return its
    summary (what ``--json`` prints).
    `hooks`: your own `Hook` instances (a `SampleLedger`, say), given to the trainer
    after the example's own, so that no one has to patch the example to add one."""
    args, opts = parser(argv).parse_args_into_dataclasses(argv)
    report = common.run_seeds_if_asked(Path(__file__), argv, args, opts, "rollout_mse")
    if report is not None:  # --seeds: the whole study once per seed, each in its own process
        return report
    common.check_matplotlib(opts.plot)
    output_dir = Path(args.output_dir)
    rendezvous = output_dir / "rendezvous"
    solver_command = [str(SOLVER), "--time_steps", str(opts.time_steps), "--dt", repr(opts.dt)]
    launcher, source = common.study_source(
        opts,
        solver_command,
        PARAMETER_BOUNDS,
        seed=args.seed,
        rendezvous=rendezvous,
        fields={"transition": ((2, 3), "float64")},  # what solver.py declares
        worker_flag="--worker",  # solver.py's, and this example's
    )

    common.leave_cores_to_simulations(opts)
    torch.manual_seed(args.seed)
    model = make_model(opts.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
    validation = held_out(opts, seed=args.seed + 1)
    timer = common.StepTimer()
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=source,
        **common.sample_or_batch(args, Transitions(opts.dt), Transitions(opts.dt).batch),
        eval_dataset=one_step_samples(validation),
        hooks=[timer, *hooks],
    )
    common.prepare_rendezvous(trainer, opts, rendezvous, solver_command, PARAMETER_BOUNDS)

    state, wall = common.train_timed(trainer)
    summary: dict[str, Any] = {
        "horizon": opts.horizon,
        "one_step_val_loss": common.final_eval_loss(trainer),  # normalised rates, all ranks
        # its tails over the held-out trajectories (each one's mean loss)
        **{f"one_step_val_loss_{k}": v for k, v in common.final_eval_tails(trainer).items()},
        **common.run_summary(
            trainer, launcher, timer.seconds, wall, opts.job_limit, timer.resumed_from
        ),
    }
    if not trainer.is_main_process:
        return summary
    first, predicted, truth = rollouts(
        trainer.accelerator.unwrap_model(trainer.model), validation, opts
    )
    persistence = truth - first[:, None, :]  # persistence predicts the first state throughout
    rollout_mse, persistence_mse = ((predicted - truth) ** 2).mean(), (persistence**2).mean()
    summary = {"rollout_mse": float(rollout_mse), "persistence_mse": float(persistence_mse),
               **summary}  # fmt: skip
    if opts.plot:
        png = output_dir / "lorenz_rollouts.png"
        plot_rollouts(validation, predicted, opts, png)
        summary["plot"] = str(png)
    print(
        f"{opts.horizon}-step rollout MSE {rollout_mse:.4g} vs persistence "
        f"{persistence_mse:.4g}: {common.compared(persistence_mse, rollout_mse)}, "
        f"after {state.global_step} steps on {state.total_samples_seen} samples"
    )
    common.print_run_end(summary, opts, wall, timer, "rollouts vs truth")
    return summary


if __name__ == "__main__":
    with common.refusals_end_the_program():
        main()
