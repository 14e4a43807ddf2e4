"""The discretisation of the Navier–Stokes example's solver, shared by every simulation
of a study (`FlowConfig`), and what it refuses (`range_problems`, `cross_problems`,
`config_problems`, a line each starting with the field's ``name=value``, from which the
example's parser names the flag: `cli`).

Standard library only: `cli` imports it before train.py's heavy imports, and `solver`
before numpy (its ``--worker`` run by hand is refused first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FlowConfig", "config_problems", "cross_problems", "grid_size_ok", "range_problems"]


def grid_size_ok(grid_size: int) -> bool:
    """Whether the solver takes `grid_size` points per side (even and >= 8)."""
    return grid_size >= 8 and grid_size % 2 == 0


def range_problems(grid_size: int, time_steps: int, interval: float, dt: float) -> list[str]:
    """What `FlowConfig` refuses in each value on its own, a line each, each starting
    with the field's ``name=value`` (the example's parser names the flag from it)."""
    problems = []
    if not grid_size_ok(grid_size):
        problems.append(f"grid_size={grid_size} must be even and >= 8")
    if time_steps < 1:
        problems.append(f"time_steps={time_steps} must be >= 1")
    if not interval > 0:
        problems.append(f"interval={interval} must be > 0")
    if not dt > 0:
        problems.append(f"dt={dt} must be > 0")
    return problems


def cross_problems(interval: float, dt: float) -> list[str]:
    """What `FlowConfig` refuses between its values (dt above interval), as
    `range_problems` says it; nothing where either is out of its own range."""
    if interval > 0 and dt > 0 and dt > interval:
        return [f"dt={dt} must be <= interval={interval}"]
    return []


def config_problems(grid_size: int, time_steps: int, interval: float, dt: float) -> list[str]:
    """Everything `FlowConfig` refuses: `range_problems`, then `cross_problems`."""
    return range_problems(grid_size, time_steps, interval, dt) + cross_problems(interval, dt)


@dataclass(frozen=True)
class FlowConfig:
    """The discretisation, shared by every simulation of a study.

    Attributes:
        grid_size: points per side (the field has grid_size**2 values; even).
        time_steps: fields sent, one every `interval` time units.
        interval: time units between two fields sent.
        dt: the largest solver time step: each interval is taken in the fewest equal
            steps of at most dt (`step`: dt itself where it divides the interval).
            The default (CFL number max |u| dt / dx about 0.3 at 64^2) stays stable up
            to 256^2 (CFL 1.1) for the study's ranges: the energy is in low wavenumbers
            and Crank–Nicolson damps the high ones (within 0.2% of dt 0.00625's fields
            over 20 time units at 256^2; docs/how-to/neural-operator.md). Other ranges
            may want dt * 64 / grid_size; one that blows up raises `Unstable`.
    """

    grid_size: int = 64
    time_steps: int = 10
    interval: float = 0.5
    dt: float = 0.025

    def __post_init__(self) -> None:
        problems = config_problems(self.grid_size, self.time_steps, self.interval, self.dt)
        if problems:
            raise ValueError("invalid Navier-Stokes configuration: " + "; ".join(problems))

    @property
    def substeps(self) -> int:
        """Solver steps per field sent: the fewest whose step is at most dt (rounded to
        the nearest, ``--dt 0.4`` ran steps of 0.5, and ``--dt 0.24``, told to lower
        ``--dt`` below a blown-up 0.25, the same 0.25: a user trial)."""
        return max(1, math.ceil(self.interval / self.dt - 1e-9))

    @property
    def step(self) -> float:
        """The solver's time step: interval / substeps, at most dt."""
        return self.interval / self.substeps

    def argv(self) -> list[str]:
        """These settings as flags of this script (what the launcher passes)."""
        return ["--grid_size", str(self.grid_size), "--time_steps", str(self.time_steps),
                "--interval", repr(self.interval), "--dt", repr(self.dt)]  # fmt: skip
