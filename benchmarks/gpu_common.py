"""What the cases of `benchmarks/gpu.py` share: the settings of one run (`Bench`), the
heat example's MLP and its samples, and the row format.

A case is a function ``case(bench) -> row | None`` (None: nothing to measure here, said
on stderr); `gpu.py` lists the cases by name in its ``CASES``. A case of its own module
imports this one, never `gpu` (which runs as ``__main__``).
"""

from __future__ import annotations

from dataclasses import dataclass
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


def reset_accelerate() -> None:
    """Forget Accelerate's process-wide state: each trainer of a run starts afresh."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
