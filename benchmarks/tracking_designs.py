"""The tracked step's extra CPU by part, with the rest of a study's step around it (issue
46, eleventh round): where `tracking_step.py` times trainers whose samples come ready
from memory, here each step also collates its batch from raw samples as a study's
reservoir replay does (a numpy feature vector and target a sample, stacked), so that
the tracking's reduction runs in caches as cold as in `surrogate_cost.py`'s study
(`study_parts.py` measured it there: about 300 us a reduction, against 66 us hot).

Variants, each its own model (the study's MLP, Adam, 32 samples a batch, the same
batches), in one process, in blocks of 200 steps that alternate (A B C ..., then the
reverse), each block's CPU on the thread's clock:

- **off**: ``mse_loss(outputs, targets)``, nothing kept;
- **fused**: the tracked step's loss (`sample_losses.fused_mse_loss`'s operator: the
  elementwise losses, their sum over their number), nothing kept;
- **take**: fused, the elementwise losses deferred into a `PeriodLosses` and taken
  every 20 steps (their per-sample means, on the host): the period's part of a
  reduction without the statistics;
- **tracked**: fused, deferred into a `SimulationLosses` and reduced every 20 steps
  (the statistics, the relative losses, one `SimulationLoss` per simulation): the
  library's tracked step as the trainer runs it when only the tracker listens;
- **mean**: fused, each step's per-sample means taken at once (no deferral), reduced
  every 20 steps.

Figures: each variant's CPU a step, and its extra over off (the median over the rounds
of the differences of their blocks); consecutive differences split the cost: fused -
off the loss, take - fused the deferral and its hand-over, tracked - take the
statistics. No target: a diagnostic.

    python benchmarks/tracking_designs.py --json
    python benchmarks/tracking_designs.py --quick    # tiny: checks, no figure
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.core.loss_per_simulation import SimulationLosses  # noqa: E402
from melissa_trainer.core.period_losses import PeriodLosses  # noqa: E402
from melissa_trainer.core.sample_losses import DeferredSampleLosses  # noqa: E402

VARIANTS = ("off", "fused", "take", "tracked", "mean")
PERIOD = 20  # steps between reductions (the default simulation_loss_steps)
SIMULATIONS, TIME_STEPS, INPUTS, OUTPUTS, WIDTH, BATCH = 48, 20, 13, 256, 128, 32
_ELEMENTWISE: Any = torch.ops.aten.mse_loss.default  # (what fused_mse_loss calls)


class Samples:
    """Raw samples as a reservoir holds them (parameters as a dict, a field), and a
    batch's collation: a feature vector and a target each, stacked."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        n = SIMULATIONS * TIME_STEPS
        self.parameters = [{f"p{j}": float(self.rng.random()) for j in range(INPUTS - 1)}
                           for _ in range(n)]  # fmt: skip
        self.fields = [self.rng.standard_normal(OUTPUTS).astype(np.float32) for _ in range(n)]
        self.ids = np.arange(n, dtype=np.int64) // TIME_STEPS

    def batch(self) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        picks = self.rng.integers(0, len(self.fields), BATCH)
        features = [np.array([*self.parameters[i].values(), i % TIME_STEPS / TIME_STEPS],
                             dtype=np.float32) for i in picks]  # fmt: skip
        targets = [self.fields[i] * np.float32(0.5) for i in picks]
        return (torch.from_numpy(np.stack(features)), torch.from_numpy(np.stack(targets)),
                self.ids[picks])  # fmt: skip


class Arm:
    """One variant's model, optimizer, samples and tracking state."""

    def __init__(self, variant: str, seed: int) -> None:
        torch.manual_seed(seed)
        self.variant = variant
        self.model = torch.nn.Sequential(
            torch.nn.Linear(INPUTS, WIDTH), torch.nn.SiLU(),
            torch.nn.Linear(WIDTH, WIDTH), torch.nn.SiLU(),
            torch.nn.Linear(WIDTH, WIDTH), torch.nn.SiLU(),
            torch.nn.Linear(WIDTH, OUTPUTS),
        )  # fmt: skip
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.samples = Samples(seed)
        self.losses = SimulationLosses(torch.device("cpu"), distributed=False)
        self.period = PeriodLosses(torch.device("cpu"))
        self.steps = 0

    def run(self, steps: int) -> float:
        """`steps` steps; their CPU, microseconds a step."""
        start = time.thread_time_ns()
        for _ in range(steps):
            self._step()
        return (time.thread_time_ns() - start) / steps / 1e3

    def _step(self) -> None:
        x, y, ids = self.samples.batch()
        self.optimizer.zero_grad(set_to_none=True)
        outputs = self.model(x)
        variant = self.variant
        if variant == "off":
            loss = F.mse_loss(outputs, y)
        else:
            elementwise = _ELEMENTWISE(outputs, y, 0)
            loss = elementwise.sum() / elementwise.numel()
            kept = elementwise.detach()
            if variant == "take":
                self.period.defer(ids, DeferredSampleLosses(kept))
            elif variant == "tracked":
                self.losses.record(ids, DeferredSampleLosses(kept))
            elif variant == "mean":
                self.losses.record(ids, kept.mean(dim=1))
        loss.backward()
        self.optimizer.step()
        self.steps += 1
        if self.steps % PERIOD == 0:
            if variant == "take":
                self.period.take()
            elif variant in ("tracked", "mean"):
                self.losses.reduce(self.steps)


def measure(rounds: int, block: int, warm: int) -> dict[str, list[float]]:
    """Each variant's CPU a step per round (blocks alternating, module docstring).

    Raises:
        RuntimeError: a variant's weights differ from off's at the end (the tracked
            loss trains bit for bit as the plain one: the same work is compared)."""
    torch.set_num_threads(1)
    arms = {v: Arm(v, 0) for v in VARIANTS}
    for arm in arms.values():
        arm.run(warm)
    out: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for v in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
            out[v].append(arms[v].run(block))
    reference = list(arms["off"].model.parameters())
    for v, arm in arms.items():
        if not all(torch.equal(a, b) for a, b in zip(arm.model.parameters(), reference,
                                                       strict=True)):  # fmt: skip
            raise RuntimeError(f"{v}'s weights differ from off's: not the same training")
    return out


def rows(results: dict[str, list[float]]) -> list[dict[str, Any]]:
    med = statistics.median
    off = results["off"]
    out = []
    for v in VARIANTS[1:]:
        extra = med(a - b for a, b in zip(results[v], off, strict=True))
        ours, base = med(results[v]), med(off)
        out.append({"case": f"tracked step, {v}: CPU a step against off (its extra: "
                            f"{extra:.1f} us, the median of the rounds' differences)",
                    "ours": round(ours, 2), "baseline": round(base, 2), "unit": "us/step",
                    "ratio": round(base / ours, 3), "target": None})  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    add_flags(p, quick="tiny: checks, no figure")
    opts = p.parse_args()
    rounds, block, warm = (2, 20, 20) if opts.quick else (opts.rounds, 200, 100)
    title = (f"the tracked step's extra CPU by part, {rounds} rounds of {block}-step blocks "
             "alternating (the machine may be busy)")  # fmt: skip
    finish(rows(measure(rounds, block, warm)), title, width=100, as_json=opts.json)


if __name__ == "__main__":
    main()
