"""What the cases of `benchmarks/gpu.py` share: the settings of one run (`Bench`), the
heat example's MLP and its samples, and the row format.

A case is a function ``case(bench) -> row | None`` (None: nothing to measure here, said
on stderr); `gpu.py` lists the cases by name in its ``CASES``. A case of its own module
imports this one, never `gpu` (which runs as ``__main__``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

BATCH = 64
SYNC_WINDOW = 8  # TrainingArguments.stop_sync_steps' default


@dataclass(frozen=True)
class Bench:
    """One run's settings, the same for every case."""

    #: the device the hand-written loops use (the trainer picks Accelerate's)
    device: torch.device
    #: interleaved rounds whose medians are compared
    rounds: int
    #: training steps timed per round
    steps: int
    #: ``--smoke``: every code path for a few steps on the CPU; figures mean nothing
    smoke: bool

    @property
    def field(self) -> dict[str, int]:
        """Keyword arguments giving the cases a small output field under --smoke."""
        return {"field": 16} if self.smoke else {}


def make_samples(n: int, field: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "params": rng.standard_normal(6).astype(np.float32),
            "field": rng.standard_normal(field).astype(np.float32),
        }
        for _ in range(n)
    ]


def process_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(s["params"]), torch.from_numpy(s["field"])


def make_model(field: int, seed: int = 0) -> torch.nn.Module:
    """The heat example's MLP shape: 6 -> 256 -> 256 -> 256 -> field."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, field),
    )


def as_batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """`process_batch`: a host block's arrays or a device block's tensors, as tensors."""
    return torch.as_tensor(block.fields["params"]), torch.as_tensor(block.fields["field"])


def row(case: str, ours: float, base: float, unit: str, target: float) -> dict[str, Any]:
    return {
        "case": case,
        "ours": round(ours, 3),
        "baseline": round(base, 3),
        "unit": unit,
        "ratio": round(ours / base, 3),
        "target": target,
    }


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota
    (a container may see the host's cores in `os.cpu_count()`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = cores or os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota readable: the affinity stands
    return cores


def reset_accelerate() -> None:
    """Forget Accelerate's process-wide state: each trainer of a run starts afresh."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


# -- the GPU's busy fraction -----------------------------------------------------------


def utilisation_meter(device: torch.device) -> Any | None:
    """A function giving the GPU's utilisation in percent now, or None without one
    (NVML through torch, else nvidia-smi)."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.utilization(device)
        return lambda: float(torch.cuda.utilization(device))
    except Exception as exc:  # no pynvml: try nvidia-smi
        print(f"torch.cuda.utilization unavailable ({exc}); trying nvidia-smi", file=sys.stderr)
    cmd = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"nvidia-smi unavailable ({exc})", file=sys.stderr)
        return None
    index = torch.cuda.current_device()

    def smi() -> float:
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=10)
        return float(lines.stdout.split()[index if len(lines.stdout.split()) > index else 0])

    return smi


class Sampler:
    """Samples `meter` every 0.1 s in a thread, with timestamps."""

    def __init__(self, meter: Any) -> None:
        self.meter = meter
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.samples.append((time.perf_counter(), self.meter()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def busy(self, start: float, end: float) -> float | None:
        inside = [u for t, u in self.samples if start <= t <= end]
        return statistics.mean(inside) / 100 if inside else None
