"""Online training on an ensemble of damped oscillators (an in-process simulator).

Each simulation integrates x'' + 2 zeta omega x' + omega^2 x = 0 from x(0) = x0,
x'(0) = 0 with random (omega, zeta, x0), and streams its state at every time step.
The ensemble runs interleaved, like simulations running side by side, into a FIRO
buffer; an MLP learns (omega, zeta, x0, t) -> (x, v) online. Validation uses held-out
simulations generated once. At the end it prints the validation error next to that of
predicting the mean state (the error to beat).

    python examples/oscillators/train.py      # small default: 7 s on 2 busy cores, 2026-11-30
    accelerate launch examples/oscillators/train.py --num_simulations 2000
    python examples/oscillators/train.py --json             # last line: JSON summary
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.parser import ArgumentParser


@dataclass
class OscillatorArgs:
    num_simulations: int = field(default=1024, metadata={"help": "simulations in the ensemble"})
    time_steps: int = field(default=100, metadata={"help": "time steps per simulation"})
    dt: float = field(default=0.05, metadata={"help": "integration time step"})
    concurrent: int = field(default=16, metadata={"help": "simulations running at once"})
    num_validation: int = field(default=16, metadata={"help": "held-out simulations"})
    hidden: int = field(default=128, metadata={"help": "MLP width"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    json: bool = field(default=False, metadata={"help": "print a JSON summary as the last line"})


#: what this example runs with unless told otherwise (shown by --help)
DEFAULTS: dict[str, Any] = {
    "output_dir": "outputs/oscillators",
    "buffer": "firo",
    "buffer_size": 2048,
    "watermark": 512,
    "batch_size": 64,
    "logging_steps": 50,
    "eval_steps": 100,
}


def parser() -> ArgumentParser:
    """The command line: TrainingArguments and OscillatorArgs, with `DEFAULTS`."""
    return ArgumentParser(TrainingArguments, OscillatorArgs, defaults=DEFAULTS)


if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply. (What comes above imports no torch.)
    parser().parse_args_into_dataclasses()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer  # noqa: E402
from melissa_trainer.common.json_output import to_json  # noqa: E402


def draw_parameters(rng: np.random.Generator) -> np.ndarray:
    """(omega, zeta, x0): frequency, damping ratio, initial displacement."""
    return np.array(
        [rng.uniform(0.5, 2.0), rng.uniform(0.05, 0.5), rng.uniform(-1.0, 1.0)], dtype=np.float32
    )


def simulate(params: np.ndarray, steps: int, dt: float) -> Iterator[dict[str, np.ndarray]]:
    """Integrate one oscillator with RK4; yield one sample per time step."""
    omega, zeta, x0 = (float(p) for p in params)

    def rhs(s: np.ndarray) -> np.ndarray:
        return np.array([s[1], -2.0 * zeta * omega * s[1] - omega**2 * s[0]])

    state = np.array([x0, 0.0])
    for step in range(steps):
        t = np.float32(step * dt)
        yield {"params": params, "t": np.asarray(t), "state": state.astype(np.float32)}
        k1 = rhs(state)
        k2 = rhs(state + 0.5 * dt * k1)
        k3 = rhs(state + 0.5 * dt * k2)
        k4 = rhs(state + dt * k3)
        state = state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def ensemble(opts: OscillatorArgs, seed: int, rank: int, world_size: int) -> Iterator[dict]:
    """This rank's share of the ensemble, `concurrent` simulations interleaved."""
    rng = np.random.default_rng([seed, rank])
    mine = range(rank, opts.num_simulations, world_size)
    pending = iter(mine)
    running: list[Iterator[dict]] = []
    while True:
        while len(running) < opts.concurrent:
            if next(pending, None) is None:
                break
            running.append(simulate(draw_parameters(rng), opts.time_steps, opts.dt))
        if not running:
            return
        for sim in list(running):
            sample = next(sim, None)
            if sample is None:
                running.remove(sim)
            else:
                yield sample


def process_sample(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = np.concatenate([sample["params"], sample["t"].reshape(1)])
    return torch.from_numpy(inputs), torch.from_numpy(sample["state"])


def process_batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """`process_sample` for a whole batch at once: a `SampleBlock` of arrays, or with
    ``--buffer_device accelerator`` a `DeviceBlock` of tensors on the device (batches
    gathered there never go through a per-sample function)."""
    fields = block.fields
    params = torch.as_tensor(fields["params"])
    t = torch.as_tensor(fields["t"], device=params.device).to(params.dtype)
    return torch.cat([params, t.reshape(-1, 1)], 1), torch.as_tensor(fields["state"])


def main(argv: list[str] | None = None, hooks: Sequence[Hook] = ()) -> dict[str, float]:
    """Run the example with the command line `argv` (None: `sys.argv`) and return its
    summary (what ``--json`` prints).
    `hooks`: your own `Hook` instances (a `SampleLedger`, say), given to the trainer
    so that no one has to patch the example to add one."""
    args, opts = parser().parse_args_into_dataclasses(argv)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, opts.hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(opts.hidden, opts.hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(opts.hidden, 2),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=opts.learning_rate)
    held_out_rng = np.random.default_rng([args.seed, 10**6])
    validation = [
        s
        for _ in range(opts.num_validation)
        for s in simulate(draw_parameters(held_out_rng), opts.time_steps, opts.dt)
    ]
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=lambda rank, world: ensemble(opts, args.seed, rank, world),
        # per sample on the host; per batch where batches are gathered on the device
        **(
            {"process_batch": process_batch}
            if args.buffer_device == "accelerator"
            else {"process_sample": process_sample}
        ),
        eval_dataset=validation,
        hooks=list(hooks),
    )
    start = time.perf_counter()
    state = trainer.train()
    truth = np.stack([s["state"] for s in validation])
    mean_field_mse = float(((truth - truth.mean(axis=0)) ** 2).mean())
    # the validation the trainer ran at the last step, else one now (not twice: each
    # validation logs its line)
    last = [h for h in state.log_history if "eval_loss" in h and h.get("step") == state.global_step]
    val_mse = float(last[-1]["eval_loss"] if last else trainer.evaluate()["eval_loss"])
    summary = {
        "val_mse": val_mse,
        "mean_field_mse": mean_field_mse,
        "steps": state.global_step,
        "samples_seen": state.total_samples_seen,  # all ranks
        "seconds": round(time.perf_counter() - start, 2),
    }
    if trainer.is_main_process:
        print(
            f"validation MSE {val_mse:.4g} vs predicting the mean state {mean_field_mse:.4g} "
            f"({_compared(mean_field_mse, val_mse)}) after {state.global_step} steps"
        )
        if opts.json:
            print(to_json(summary))
    return summary


def _compared(baseline: float, ours: float) -> str:
    """How error `ours` compares with `baseline`: "3.7x better" when lower, "21.4x worse"
    when higher (a ratio below 1 printed as "better" reads as a win)."""
    if ours <= baseline:
        return f"{baseline / max(ours, 1e-12):.1f}x better"
    return f"{ours / max(baseline, 1e-12):.1f}x worse"


if __name__ == "__main__":
    main()
