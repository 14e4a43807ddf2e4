"""The heat row of benchmarks/trainer_overhead.py (`measure_heat`): OnlineTrainer against
offline's loop on `online_vs_offline.py`'s workload (`heat_pipelines`, `heat_offline`),
in steps per CPU-second of the process."""

from __future__ import annotations

import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from trainer_overhead_workload import Prefilled

from melissa_trainer import Hook


def measure_heat(rounds: int, steps: int) -> tuple[float, float]:
    """Medians (OnlineTrainer, offline's loop) in steps per CPU-second of the process, on
    `online_vs_offline.py`'s workload (`heat_pipelines`): the heat MLP 7-256-256-256-1024,
    batch 32, Adam, a reservoir of 10,000 samples (100 simulations of 100 steps, random
    fields) read by the benchmark's vectorized `process_batch`, against offline's loop on
    the same samples' features in memory (`heat_offline.MemoryBatches`: one index of two
    tensors a batch). Interleaved rounds of `steps` steps; the learning rate is constant
    in both."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import heat_offline
    import heat_pipelines as hp
    from accelerate.state import AcceleratorState, GradientState

    setup = hp.Setup()
    rng = np.random.default_rng(0)
    n = setup.grid_size
    samples = []
    for sim in range(setup.buffer_size // setup.time_steps):
        parameters = rng.uniform(0.0, 1.0, len(hp.NAMES))
        for t in range(setup.time_steps):
            samples.append({
                "temperature": rng.uniform(300.0, 400.0, (n, n)).astype(np.float32),
                "time_step": np.array(t), "parameters": parameters,
                "simulation_id": np.array(sim, np.int64),
            })  # fmt: skip
    x, y = hp.batch_features(
        np.array([s["parameters"] for s in samples]), np.array([s["time_step"] for s in samples]),
        np.array([s["temperature"] for s in samples]), setup.time_steps,
    )  # fmt: skip

    class CpuClock(Hook):
        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            self.start = time.process_time()

        def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
            self.seconds = time.process_time() - self.start

    def ours(out: str) -> float:
        AcceleratorState._reset_state(reset_partial_state=False)
        GradientState._reset_state()
        trainer = hp.online_trainer(setup, Path(out), Prefilled(samples), max_steps=steps,
                              sample_to_insert_ratio=0)  # fmt: skip
        clock = CpuClock()
        trainer.hooks.add(clock)
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
        return steps / clock.seconds

    def offline(seed: int) -> float:
        model = hp.make_model(setup)
        optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
        generator = torch.Generator().manual_seed(seed)
        batches = heat_offline.MemoryBatches(x, y, setup.batch_size, generator)
        start, done = time.process_time(), 0
        while done < steps:
            for xb, yb in batches:
                loss = torch.nn.functional.mse_loss(model(xb), yb)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                done += 1
                if done == steps:
                    break
        return steps / (time.process_time() - start)

    out = tempfile.mkdtemp(prefix="mt-overhead-heat-")
    rates: tuple[list[float], list[float]] = ([], [])
    try:
        offline(0)  # warm-up
        for r in range(rounds):
            rates[0].append(ours(out))
            rates[1].append(offline(r))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return statistics.median(rates[0]), statistics.median(rates[1])
