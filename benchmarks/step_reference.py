"""A reference workload run on the training thread between a study's steps: the machine's
speed at those very moments, measured by the same clock as the steps (issue 46, ninth
round).

The CPU a step costs follows the machine's state (its other processes, what they leave
in the caches, the process's own memory layout) as much as the code: two studies of the
same code differ by a few percent. `StepReference` runs a fixed, untracked training
step of a copy of the study's model on one fixed batch, `steps` of them every `every`
steps of the study, and times them with `time.thread_time`; a study's rate divided by its
reference's rate is what its code costs relative to the machine it ran on, and the ratio
of two studies' normalised rates cancels what their machines' states had in common
(a control variate). The reference's own CPU is not the study's: `surrogate_cost`
subtracts it from the span.

Two workloads (`make_reference`, ``kind``): **"step"** (`StepReference`), the ninth
round's, a step of the study's own model; **"compute"** (`ComputeReference`, the twelfth
round's), the same small matrix product repeated, whose operands (48 KiB) stay in the
core's first caches between two runs. The control variate is sound only if the arms' work
leaves the reference alone: the step reference, whose weights and optimizer state
(about 1.3 MB) the tracked arm's work evicts between two runs, read 0.89-0.91 on / off
where the study's own steps moved 1-3% (docs/measured.md, issue 46's tenth round); a
workload that fits in the first caches is evicted far less by a neighbour's traffic
(measured: it still moved 0.97-1.01 on / off, about 1.3% slower on average in the
twelfth round's quiet runs, within the tolerance below), and follows what moves every
instruction alike (the clock, the CPU time a hypervisor takes). `surrogate_cost.py`
prints the reference's rate on / off in every run and voids a row whose reference
moved beyond its tolerance, whichever workload.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

import torch


class StepReference:
    """`steps` plain training steps (forward, MSE, backward, Adam) of a private copy of
    `model` on one fixed random batch of `batch_size` rows, each time `run` is called;
    `seconds` and `count` add up their thread CPU and number. Deterministic (its own
    generator), independent of the study's data and weights after the copy."""

    def __init__(self, model: torch.nn.Module, batch_size: int, steps: int = 1) -> None:
        self.model = copy.deepcopy(model)
        linears = [m for m in self.model.modules() if isinstance(m, torch.nn.Linear)]
        generator = torch.Generator().manual_seed(46)
        self.x = torch.randn(batch_size, linears[0].in_features, generator=generator)
        self.y = torch.randn(batch_size, linears[-1].out_features, generator=generator)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.steps = steps
        self.seconds = 0.0
        self.count = 0

    def run(self) -> None:
        """`steps` reference steps, timed (the thread's CPU)."""
        start = time.thread_time()
        for _ in range(self.steps):
            self.optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
            loss.backward()
            self.optimizer.step()
        self.seconds += time.thread_time() - start
        self.count += self.steps

    @property
    def rate(self) -> float:
        """Reference steps per CPU-second so far (0 before any)."""
        return self.count / self.seconds if self.seconds > 0 else 0.0


class ComputeReference:
    """`products` products of one fixed random pair of 64 x 64 float32 matrices (each
    written into one preallocated output: no allocation), `steps` times each time
    `run` is called; `seconds`, `count` and `rate` as `StepReference`'s. Its
    operands and output, 48 KiB, stay in the first caches; about 90 microseconds a run
    on this machine's cores (timed by hand with `timeit`, quiet)."""

    SIZE = 64

    def __init__(self, steps: int = 1, products: int = 8) -> None:
        generator = torch.Generator().manual_seed(46)
        n = self.SIZE
        self.a = torch.randn(n, n, generator=generator) / n**0.5
        self.b = torch.randn(n, n, generator=generator) / n**0.5
        self.out = torch.empty(n, n)
        self.steps, self.products = steps, products
        self.seconds = 0.0
        self.count = 0

    def run(self) -> None:
        """`steps` reference runs, timed (the thread's CPU)."""
        a, b, out = self.a, self.b, self.out
        start = time.thread_time()
        for _ in range(self.steps):
            for _ in range(self.products):
                torch.mm(a, b, out=out)
        self.seconds += time.thread_time() - start
        self.count += self.steps

    @property
    def rate(self) -> float:
        """Reference runs per CPU-second so far (0 before any)."""
        return self.count / self.seconds if self.seconds > 0 else 0.0


#: a reference workload
Reference = StepReference | ComputeReference
#: the reference workloads (`make_reference`'s ``kind``)
KINDS = ("step", "compute")


def make_reference(kind: str, model: torch.nn.Module, batch_size: int) -> Reference:
    """The reference workload `kind` (`KINDS`) for a study of `model`."""
    if kind == "step":
        return StepReference(model, batch_size)
    if kind == "compute":
        return ComputeReference()
    raise ValueError(f"reference kind {kind!r}: one of {KINDS}")


def plan(reference: Mapping[str, Any] | None) -> tuple[str, int, int] | None:
    """A study's reference as `(kind, every, offset)`: the workload `kind` runs after
    the steps whose number ``% every == offset`` (None: no reference). A design's
    ``{"kind", "every", "offset"}`` (`cost_spread.DESIGNS`).

    Why an offset: the per-simulation losses are reduced after the steps that are
    multiples of 20; a reference run right after one starts in the caches the reduction
    just swept (hundreds of kilobytes: its period's losses), which no off arm does.
    With every 10 and offset 5 no reference follows a reduction (issue 46, twelfth
    round: the step reference moved 0.92 on / off at offset 0, 0.95 at offset 5; the
    compute one 0.97 and 0.985, while the trainer's own steps moved 0.98-0.99; busy
    machine, 4 pairs each, `reference_sensitivity.py`).

    Raises:
        ValueError: an unknown kind, ``every < 1`` or an offset outside ``[0, every)``.
    """
    if not reference:
        return None
    kind, every, offset = reference["kind"], int(reference["every"]), int(reference["offset"])
    if kind not in KINDS or every < 1 or not 0 <= offset < every:
        raise ValueError(f"reference {dict(reference)}: a kind of {KINDS}, every >= 1, "
                         "0 <= offset < every")  # fmt: skip
    return kind, every, offset
