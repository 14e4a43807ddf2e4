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
"""

from __future__ import annotations

import copy
import time

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
