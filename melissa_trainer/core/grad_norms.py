"""The gradient norms that the training steps clip, summed on the device between logs
(`GradNorms`: each `TrainStep`'s, read by `figures.LogFigures`).
"""

from __future__ import annotations

import torch


class GradNorms:
    """The total gradient norms (before clipping) of the optimizer steps since the last
    log, with ``max_grad_norm``: summed on the device, so that a step makes the host
    wait for nothing; `LogFigures` reads the sum with its own figures, once per log,
    and restarts it. Not thread-safe: the training thread.

    Attributes:
        sum: the norms' sum (a 0-d float32 tensor on the training device).
        count: the norms in `sum`.
    """

    def __init__(self, device: torch.device) -> None:
        self.sum = torch.zeros((), dtype=torch.float32, device=device)
        self.count = 0

    def add(self, norm: torch.Tensor | float | None) -> None:
        """Add one step's norm (a tensor on the device: no host read); None (what
        Accelerate gives where no norm is known) is left out."""
        if norm is not None:
            self.sum += norm.detach().float() if isinstance(norm, torch.Tensor) else norm
            self.count += 1

    def restart(self) -> None:
        """Nothing counted from now on."""
        self.sum.zero_()
        self.count = 0
