"""A field-sized surrogate on CPU: the Navier–Stokes example's FNO trained by OnlineTrainer
versus a hand-written torch loop of the same model on the same data.

Row "fno_trainer_vs_hand_loop": the example's FNO (`examples/navier_stokes/models.py`,
its default width 16, 12 modes, 4 Fourier layers) on GRID^2 fields (64 by default),
batch 16, Adam, one torch thread. The data: `N_SAMPLES` samples shaped like the
example's stream (omega(0) from the solver's random initial field, omega(t), parameters,
time step), precomputed here and put into the trainer's reservoir by an in-process
source; both sides map samples to batches with the example's `process_sample` and draw
`batch_size` random samples per step. OnlineTrainer runs with its default hooks. The
two alternate (A B A B ...), each round a fresh model of the same seed, and the medians
of the steps per second are compared; target: ours >= 0.97x the hand loop (a step here is
~0.2 s of compute, so the framework's per-step cost should vanish in it).

    python benchmarks/field_surrogate.py            # 64^2, 5 rounds of 40 steps
    python benchmarks/field_surrogate.py --quick    # 32^2, 3 rounds of 15 steps
    python benchmarks/field_surrogate.py --json     # {"rows": [...]}

Not measured yet (issue 42, item 5's second row): the step rate while 256^2 fields
stream in from a real client over ZeroMQ, against the step alone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # report.py, trainer_overhead.py
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "examples" / "navier_stokes"))
from models import make_model  # noqa: E402
from report import print_rows  # noqa: E402
from solver import PARAMETER_BOUNDS, PARAMETER_NAMES, initial_vorticity  # noqa: E402
from trainer_overhead import Clock, Prefilled  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.json_output import to_json  # noqa: E402

TARGET = 0.97
N_SAMPLES = 256
BATCH = 16
TIME_STEPS = 10
#: the example's default model: width, modes, layers
WIDTH, MODES, LAYERS = 16, 12, 4
CHANNELS = 4


def example_mapping() -> Any:
    """The example's `make_process_sample` (imported from its train.py)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "navier_stokes" / "train.py"
    spec = importlib.util.spec_from_file_location("_navier_stokes_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.make_process_sample(TIME_STEPS)


def make_samples(n_samples: int, grid: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Samples shaped like the example's stream: omega(0) the solver's initial field of
    a seed, omega(t) another (the values do not change a step's cost)."""
    rng = np.random.default_rng(seed)
    fields = [initial_vorticity(grid, s).astype(np.float32) for s in range(32)]
    samples = []
    for i in range(n_samples):
        vector = np.array([rng.uniform(*PARAMETER_BOUNDS[p]) for p in PARAMETER_NAMES])
        samples.append(
            {
                "vorticity": fields[(i + 1) % len(fields)],
                "initial": fields[i % len(fields)],
                "time_step": np.array(i % TIME_STEPS, np.int64),
                "parameters": vector,
            }
        )
    return samples


def model(seed: int, modes: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return make_model("fno", CHANNELS, WIDTH, modes, LAYERS)


def run_ours(samples: list, mapping: Any, steps: int, out: str, seed: int, modes: int) -> float:
    """OnlineTrainer's steps/s over `steps` steps."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # every sample is in the buffer: no rate limit
        buffer_size=len(samples),
        watermark=BATCH,
        max_steps=steps,
        save_at_end=False,
        seed=seed,
    )
    net = model(seed, modes)
    clock = Clock()
    trainer = OnlineTrainer(
        net,
        args,
        torch.optim.Adam(net.parameters(), lr=1e-3),
        train_source=Prefilled(samples),
        process_sample=mapping,
        hooks=[clock],
    )
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return steps / clock.seconds


def run_hand(samples: list, mapping: Any, steps: int, seed: int, modes: int) -> float:
    """The same model, data, mapping and batch size in a plain torch loop: steps/s."""
    net = model(seed, modes)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = random.Random(seed)
    start = time.perf_counter()
    for _ in range(steps):
        examples = [mapping(s) for s in rng.choices(samples, k=BATCH)]
        x = torch.stack([e[0] for e in examples])
        y = torch.stack([e[1] for e in examples])
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps / (time.perf_counter() - start)


def measure(rounds: int, steps: int, grid: int) -> tuple[float, float]:
    """Medians (ours, hand loop) in steps/s over `rounds` interleaved rounds."""
    samples = make_samples(N_SAMPLES, grid)
    mapping = example_mapping()
    modes = min(MODES, grid // 2)
    out = tempfile.mkdtemp(prefix="mt-field-")
    ours, hand = [], []
    try:
        run_hand(samples, mapping, 3, 0, modes)  # warm-up
        for r in range(rounds):
            ours.append(run_ours(samples, mapping, steps, out, seed=r, modes=modes))
            hand.append(run_hand(samples, mapping, steps, seed=r, modes=modes))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return statistics.median(ours), statistics.median(hand)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="32^2, fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--grid", type=int, default=None, help="grid side (default 64)")
    opts = parser.parse_args(argv)
    rounds = opts.rounds or (3 if opts.quick else 5)
    steps = opts.steps or (15 if opts.quick else 40)
    grid = opts.grid or (32 if opts.quick else 64)
    torch.set_num_threads(1)
    ours, hand = measure(rounds, steps, grid)
    rows = [
        {
            "case": "fno_trainer_vs_hand_loop",
            "ours": round(ours, 3),
            "baseline": round(hand, 3),
            "unit": "steps/s",
            "ratio": round(ours / hand, 3),
            "target": TARGET,
        }
    ]
    if opts.json:
        print(to_json({"rows": rows}))
        return
    print_rows(
        rows,
        f"FNO width {WIDTH}, {min(MODES, grid // 2)} modes, {LAYERS} layers, {grid}^2, batch "
        f"{BATCH}, Adam, 1 thread, CPU; medians of {rounds} interleaved rounds of {steps} steps",
    )


if __name__ == "__main__":
    main()
