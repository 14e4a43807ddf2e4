"""Case (a) of issue 42 for `benchmarks/gpu.py`: the Navier–Stokes example's FNO
(`examples/navier_stokes/models.py`) at 256^2, batch 16, bf16 autocast, on a GPU.

* ``fno``: OnlineTrainer against a hand-written loop of the same model on the same
  samples, in steps/s after 10 untimed warm-up steps (cuFFT plans, cuDNN's choices).
  Both hold the samples on the device and build each batch there with the example's
  own `make_process_batch`: ours with ``buffer_device="accelerator"`` (the reservoir
  mirrored on the GPU, draws from the host's seeded reservoir, `stage_batches` and every
  default hook on), the hand loop with ``torch.randint`` on the device and
  ``index_select`` (nothing on the host: the strictest baseline). Model: width 32, 12
  modes, 4 Fourier layers (the example's GPU flags); Adam (``foreach``, its CUDA
  default) in both. Interleaved rounds, medians; target 0.97.

Case (b), ``fno_busy``, is `gpu_fno_busy`'s; it trains the same model.

Under ``--smoke`` (CPU, for the tests): 16^2, width 8, batch 4, a few steps.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import torch
from gpu_common import Bench, reset_accelerate, row
from gpu_compile import WarmClock
from trainer_overhead import Prefilled, synchronize

from melissa_trainer import OnlineTrainer, TrainingArguments

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: the example's time steps per simulation in `fno` (its feature t = step / time steps)
TIME_STEPS = 10
LEARNING_RATE = 1e-3


@dataclass(frozen=True)
class Size:
    """The FNO and its data: grid side, batch, width, modes, Fourier layers, samples."""

    grid: int = 256
    batch: int = 16
    width: int = 32
    modes: int = 12
    layers: int = 4
    samples: int = 256


SMOKE = Size(grid=16, batch=4, width=8, modes=4, layers=2, samples=16)


def size_of(bench_smoke: bool) -> Size:
    return SMOKE if bench_smoke else Size()


def load_example() -> ModuleType:
    """`examples/navier_stokes/train.py`, imported as `navier_stokes.train` (examples/ on
    ``sys.path``): its own modules are `navier_stokes.solver` and `navier_stokes.models`,
    which no other example's module of the same bare name can shadow."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(1, str(EXAMPLES))
    return importlib.import_module("navier_stokes.train")


def make_samples(size: Size, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Samples shaped like the example's stream (its solver's random initial fields as
    omega(0) and omega(t): the values do not change a step's cost)."""
    ns = load_example()
    rng = np.random.default_rng(seed)
    fields = [ns.initial_vorticity(size.grid, s).astype(np.float32) for s in range(8)]
    bounds = [ns.PARAMETER_BOUNDS[p] for p in ns.PARAMETER_NAMES]
    return [
        {
            "vorticity": fields[(i + 1) % len(fields)],
            "initial": fields[i % len(fields)],
            "time_step": np.array(i % TIME_STEPS, np.int64),
            "parameters": np.array([rng.uniform(*b) for b in bounds]),
        }
        for i in range(size.samples)
    ]


def make_fno(size: Size, seed: int) -> torch.nn.Module:
    ns = load_example()
    torch.manual_seed(seed)
    return ns.make_model("fno", ns.CHANNELS, size.width, size.modes, size.layers)


class HandLoop:
    """The hand-written loop: the FNO, Adam, bf16 autocast, batches drawn on the device
    (``torch.randint``) from `samples` stacked there once, made by the example's
    `make_process_batch`. Not thread-safe."""

    def __init__(self, size: Size, samples: list, device: torch.device, seed: int) -> None:
        self.device, self.batch = device, size.batch
        self.model = make_fno(size, seed).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
        self.fields = {
            k: torch.from_numpy(np.stack([s[k] for s in samples])).to(device) for k in samples[0]
        }
        self.process_batch = load_example().make_process_batch(TIME_STEPS)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.n = len(samples)

    def run(self, steps: int) -> None:
        """`steps` training steps, queued (no host sync)."""
        for _ in range(steps):
            index = torch.randint(
                self.n, (self.batch,), device=self.device, generator=self.generator
            )
            fields = {k: v.index_select(0, index) for k, v in self.fields.items()}
            inputs, target = self.process_batch(SimpleNamespace(fields=fields))
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(self.model(inputs), target)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

    def steps_per_second(self, steps: int, warmup: int) -> float:
        self.run(warmup)
        synchronize(self.device)
        start = time.perf_counter()
        self.run(steps)
        synchronize(self.device)
        return steps / (time.perf_counter() - start)


def run_trainer(size: Size, samples: list, steps: int, warmup: int, out: str, seed: int) -> float:
    """OnlineTrainer's steps/s after `warmup` steps: the device reservoir holding
    `samples`, no rate limit, the example's process_batch, bf16, default hooks."""
    reset_accelerate()
    args = TrainingArguments(
        output_dir=out, batch_size=size.batch, buffer="reservoir", sample_to_insert_ratio=0,
        buffer_size=len(samples), watermark=size.batch, buffer_device="accelerator",
        mixed_precision="bf16", max_steps=warmup + steps, save_at_end=False, seed=seed,
        report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = make_fno(size, seed)
    clock = WarmClock(warmup)
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=LEARNING_RATE),
        train_source=Prefilled(samples),
        process_batch=load_example().make_process_batch(TIME_STEPS), hooks=[clock],
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return steps / clock.seconds


def case_fno(bench: Bench) -> dict[str, Any]:
    size = size_of(bench.smoke)
    samples = make_samples(size)
    steps, warmup = (bench.steps, 2) if bench.smoke else (200, 10)
    ours, base = [], []
    with tempfile.TemporaryDirectory(prefix="mt-gpu-fno-") as out:
        for r in range(bench.rounds):
            ours.append(run_trainer(size, samples, steps, warmup, out, r))
            base.append(HandLoop(size, samples, bench.device, r).steps_per_second(steps, warmup))
    return row(
        f"FNO {size.grid}^2 batch {size.batch} bf16: trainer vs hand-written loop",
        statistics.median(ours),
        statistics.median(base),
        "steps/s",
        0.97,
    )
