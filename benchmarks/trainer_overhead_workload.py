"""The workload `trainer_overhead.py` times, shared with the benchmarks built on it
(ingest_split.py, ingest_pinned.py, field_surrogate.py, gpu_fno.py): its samples (3
parameters, a 1024-value field), the MLP 3 -> 256 -> 256 -> 1024, batch 64, a `Source`
that puts every sample into the buffer at start (`Prefilled`), and the clock of the
trainer's loop (`Clock`), which waits for the device as a GPU computes asynchronously.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from melissa_trainer import Buffer, Hook, Source

N_SAMPLES = 4096
BATCH = 64


def make_samples(n: int, seed: int, with_ids: bool = False) -> list[dict[str, np.ndarray]]:
    """`n` samples; `with_ids`: with the `simulation_id` the receiver adds (16 each)."""
    rng = np.random.default_rng(seed)
    samples = [
        {
            "params": rng.standard_normal(3).astype(np.float32),
            "field": rng.standard_normal(1024).astype(np.float32),
        }
        for _ in range(n)
    ]
    if with_ids:
        for i, sample in enumerate(samples):
            sample["simulation_id"] = np.array(i // 16, np.int64)
    return samples


def process_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(s["params"]), torch.from_numpy(s["field"])


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 1024),
    )


class Prefilled(Source):
    """Puts the samples into the buffer at start and never closes it; with the trainer's
    ingest transform (the heat case's features, `heat_pipelines.online_trainer`), each sample
    transformed as it is put, at start: before the timed loop, as offline computes its
    features before its own."""

    def __init__(self, samples: list[dict[str, np.ndarray]]) -> None:
        self.samples = samples
        self.transform: Any = None

    def set_ingest_transform(self, transform: Any) -> None:
        self.transform = transform

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        samples = self.samples if self.transform is None else self.transform.many(self.samples)
        for s in samples:
            buffer.put(s)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        pass  # everything is in the buffer already

    def stop(self) -> None:
        pass


def training_device() -> torch.device:
    """The device OnlineTrainer trains on in this process (Accelerate's choice)."""
    from accelerate import PartialState

    return PartialState().device


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on `device` (CUDA runs asynchronously to the host)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Clock(Hook):
    """Times the loop from TRAIN_START to LOOP_END (no per-step event): the steps and
    their periodic logs, as the baseline's loop; not what follows the last step (the
    final actions, stopping the source), which is no per-step cost."""

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        synchronize(trainer.accelerator.device)
        self.start = time.perf_counter()

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        synchronize(trainer.accelerator.device)
        self.seconds = time.perf_counter() - self.start
