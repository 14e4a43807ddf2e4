"""What the two pipelines of `online_vs_offline.py` share, on the heat example's
solver: the problem (`Setup`, the `design`, the held-out `validation_set`), the
features, the model, the learning-rate rule, the validation (`Tracker`) and a run's
record (`new_run`, `finish`). The online pipeline is `heat_pipelines`, the offline
one `heat_offline`; both import these from here (and `heat_pipelines` re-exports them:
``hp.Setup`` keeps working).

Both train the same model with the same optimizer, batch size, seed and learning-rate
rule (cosine decay over the run's progress: its share of a sample budget, or of a time
budget), and are validated with the same function on the same held-out simulations,
never streamed nor stored, at the same wall-clock times. Every function returns a
`Run` dict (see `new_run`); times are seconds of `time.perf_counter()`.

The parameters are the heat example's five temperatures and the diffusivity
(``log2_alpha`` in [-2, 2]): the field is linear in the temperatures, not in alpha.
Training simulations follow one scrambled Halton sequence (any prefix of it covers the
space evenly), so online and offline draw the same simulations in the same order.
Importing this module puts the heat example's directory on `sys.path` (its `solver`).
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "heat_pde"
sys.path.insert(0, str(EXAMPLE))
from solver import (  # noqa: E402
    LOG2_ALPHA_RANGE,
    PARAMETER_BOUNDS,
    PARAMETER_NAMES,
    TEMPERATURE_RANGE,
    HeatConfig,
    solve,
)

from melissa_trainer.hooks import budget_factor  # noqa: E402
from melissa_trainer.launcher import LocalBackend, Placement, make_sampler  # noqa: E402

__all__ = [
    "BOUNDS",
    "CENTER",
    "EXAMPLE",
    "NAMES",
    "POLL",
    "SCALE",
    "SOLVER",
    "HeatConfig",
    "Run",
    "Setup",
    "Tracker",
    "batch_features",
    "design",
    "disk_bytes",
    "features",
    "finish",
    "learning_rate",
    "load_parameters",
    "make_model",
    "new_run",
    "per_simulation_mse",
    "solve",
    "validation_mse",
    "validation_set",
]

SOLVER = EXAMPLE / "solver.py"
NAMES = (*PARAMETER_NAMES, "log2_alpha")
BOUNDS = {**PARAMETER_BOUNDS, "log2_alpha": LOG2_ALPHA_RANGE}
CENTER = 0.5 * (TEMPERATURE_RANGE[0] + TEMPERATURE_RANGE[1])
SCALE = 0.5 * (TEMPERATURE_RANGE[1] - TEMPERATURE_RANGE[0])
#: The launcher's polling period (s): it starts the next simulation within this long
#: of one ending; the default 0.2 s would leave the simulations' core idle between
#: these short runs (the same for both pipelines).
POLL = 0.02

Run = dict[str, Any]


@dataclass(frozen=True)
class Setup:
    """What both pipelines share: the problem, the model, the optimizer, the resources."""

    grid_size: int = 32
    time_steps: int = 100
    hidden: int = 256
    batch_size: int = 32
    learning_rate: float = 1e-3
    seed: int = 0
    sim_jobs: int = 1  # simulations at once: the cores they get
    torch_threads: int = 1  # the training's threads
    loader_workers: int = 0  # offline DataLoader worker processes
    buffer_size: int = 10_000  # online reservoir, samples
    watermark: int = 1_000  # online: samples before the first step
    n_validation: int = 16  # held-out simulations
    substeps: int = 1  # the solver's implicit steps per sample: its cost per sample
    dt: float = 1e-3  # the time between two samples (time_steps * dt: the horizon)
    #: pin the training process to one core and the simulations to another (as a GPU
    #: node splits them); `cores` picks which: (training, simulations)
    pin: bool = False
    cores: tuple[int, int] = (0, 1)
    #: how the launcher starts the simulations beside the trainer: "default" (the local
    #: backend's default `Placement`: niceness +10 in the trainer's session, one
    #: BLAS/OpenMP thread) or "none" (``LocalBackend(placement=None)``: a session of its
    #: own each, nothing changed, ``OMP_NUM_THREADS=1`` set by this benchmark: the
    #: launcher before placements existed)
    placement: str = "default"
    #: with placement "default": the simulations' niceness (None: the library's, 10)
    sim_nice: int | None = None

    def launcher_options(self) -> dict[str, Any]:
        """The `Launcher` arguments that `placement` decides (backend, env)."""
        if self.placement == "default":
            if self.sim_nice is None:
                return {"backend": LocalBackend()}
            return {"backend": LocalBackend(Placement(nice=self.sim_nice))}
        if self.placement == "none":
            return {"backend": LocalBackend(placement=None), "env": {"OMP_NUM_THREADS": "1"}}
        raise ValueError(f"placement must be 'default' or 'none', not {self.placement!r}")

    @property
    def config(self) -> HeatConfig:
        return HeatConfig(self.grid_size, self.time_steps, self.dt, substeps=self.substeps)

    def solver_command(self) -> list[str]:
        """The solver's command line (pinned to the simulations' core with `pin`)."""
        command = [sys.executable, str(SOLVER), *self.config.argv()]
        if self.pin:
            command = ["taskset", "-c", str(self.cores[1]), *command]
        return command

    def pin_training(self) -> None:
        """With `pin`, bind this process (its calling thread and every thread it starts
        after: call it first, while it has one thread) to the training core."""
        if self.pin:
            available = os.sched_getaffinity(0)
            if not set(self.cores) <= available:
                raise RuntimeError(
                    f"pinning needs cores {self.cores}; this process may use {sorted(available)}"
                )
            os.sched_setaffinity(0, {self.cores[0]})

    @property
    def sample_bytes(self) -> int:
        return 4 * self.grid_size**2


def design(setup: Setup, n: int) -> list[dict[str, float]]:
    """The first `n` training simulations' parameters (scrambled Halton, seeded)."""
    sampler = make_sampler("halton", BOUNDS, seed=setup.seed)
    return [sampler.draw() for _ in range(n)]


def features(parameters: np.ndarray, step: int, field: np.ndarray, steps: int) -> tuple:
    """One sample -> (inputs, target) tensors: the temperatures mapped onto [-1, 1],
    log2_alpha / 2, sqrt of the time's fraction; the field flattened onto [-1, 1]."""
    x = np.empty(len(NAMES) + 1, dtype=np.float32)
    x[:5] = (parameters[:5] - CENTER) / SCALE
    x[5] = parameters[5] / 2.0
    x[6] = math.sqrt((step + 1) / steps)
    y = (np.asarray(field, dtype=np.float32).reshape(-1) - np.float32(CENTER)) / np.float32(SCALE)
    return torch.from_numpy(x), torch.from_numpy(y)


def batch_features(
    parameters: np.ndarray, steps: np.ndarray, fields: np.ndarray, time_steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`features` of a batch at once (one row a sample; `parameters` (B, 6), `steps`
    (B,), `fields` (B, n, n)): what both pipelines train on, vectorized."""
    parameters = np.asarray(parameters, dtype=np.float64).reshape(len(steps), len(NAMES))
    x = np.empty((len(steps), len(NAMES) + 1), dtype=np.float32)
    x[:, :5] = (parameters[:, :5] - CENTER) / SCALE
    x[:, 5] = parameters[:, 5] / 2.0
    x[:, 6] = np.sqrt((np.asarray(steps, dtype=np.float64) + 1) / time_steps)
    y = np.asarray(fields, dtype=np.float32).reshape(len(steps), -1) - np.float32(CENTER)
    y /= np.float32(SCALE)
    return torch.from_numpy(x), torch.from_numpy(y)


def validation_set(setup: Setup) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of the held-out simulations (uniform draws, another seed)."""
    sampler = make_sampler("uniform", BOUNDS, seed=setup.seed + 10_000)
    xs, ys = [], []
    for _ in range(setup.n_validation):
        p = sampler.draw()
        vector = np.array([p[n] for n in NAMES])
        for step, field in enumerate(solve(p, setup.config)):
            x, y = features(vector, step, field, setup.time_steps)
            xs.append(x)
            ys.append(y)
    return torch.stack(xs), torch.stack(ys)


def make_model(setup: Setup) -> torch.nn.Module:
    """The heat example's MLP, seeded: both pipelines start from the same weights."""
    torch.manual_seed(setup.seed)
    width = setup.hidden
    return torch.nn.Sequential(
        torch.nn.Linear(len(NAMES) + 1, width),
        torch.nn.SiLU(),
        torch.nn.Linear(width, width),
        torch.nn.SiLU(),
        torch.nn.Linear(width, width),
        torch.nn.SiLU(),
        torch.nn.Linear(width, setup.grid_size**2),
    )


def learning_rate(setup: Setup, progress: float, decay_from: float = 0.0) -> float:
    """`learning_rate` held until progress `decay_from`, then a cosine decay to 0 at
    progress 1 (the library's `budget_factor`: warmup-stable-decay without a warmup);
    `decay_from` 0: the cosine decay over the whole budget."""
    return setup.learning_rate * budget_factor(progress, decay_from)


@torch.no_grad()
def validation_mse(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean squared error in kelvin squared over every point of every held-out step."""
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, len(x), 800):
        diff = model(x[start : start + 800]) - y[start : start + 800]
        total += float(diff.double().pow(2).sum())
    model.train(was_training)
    return total / y.numel() * SCALE**2


@torch.no_grad()
def per_simulation_mse(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, time_steps: int
) -> np.ndarray:
    """Each held-out simulation's MSE in kelvin squared, over its points and steps: the
    rows of `x` and `y` are the simulations' `time_steps` steps one after the other."""
    if len(x) % time_steps:
        raise ValueError(f"{len(x)} rows are not whole simulations of {time_steps} steps")
    was_training = model.training
    model.eval()
    sums = []
    for start in range(0, len(x), 800):
        diff = model(x[start : start + 800]) - y[start : start + 800]
        sums.append(diff.double().pow(2).sum(dim=1))
    model.train(was_training)
    rows = torch.cat(sums).reshape(-1, time_steps).sum(dim=1) / (time_steps * y.shape[1])
    out: np.ndarray = rows.numpy() * SCALE**2
    return out


class Tracker:
    """Validation at fixed wall-clock times since `t0` (and at the end): the curve.

    The time spent validating is inside the measured wall time of both pipelines.
    """

    def __init__(
        self, x: torch.Tensor, y: torch.Tensor, every: float | None, start: float = 0.0
    ) -> None:
        """`start`: the clock's reading now (a phase that starts after others)."""
        self.x, self.y, self.every = x, y, every
        self.t0 = time.perf_counter() - start
        self.curve: list[tuple[float, float]] = []
        self._next = every * (math.floor(start / every) + 1) if every else math.inf

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def maybe(self, model: torch.nn.Module) -> None:
        if self.elapsed() >= self._next:
            self.record(model)
            while self._next <= self.elapsed():
                self._next += self.every or math.inf

    def record(self, model: torch.nn.Module) -> float:
        mse = validation_mse(model, self.x, self.y)
        self.curve.append((round(self.elapsed(), 3), mse))
        return mse


def new_run(pipeline: str, **fields: Any) -> Run:
    """A run's record; `finish` fills the measured keys."""
    return {"pipeline": pipeline, **fields}


def finish(run: Run, tracker: Tracker, model: torch.nn.Module, wall: float) -> Run:
    """The final validation (at `wall`), the curve and the process's peak RSS."""
    run["val_mse"] = tracker.record(model)
    run["wall"] = round(wall, 3)
    run["curve"] = tracker.curve
    run["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return run


def load_parameters(npy_path: str) -> np.ndarray:
    """The parameter vector (`NAMES` order) saved beside a simulation's .npy."""
    named = json.loads(Path(npy_path + ".json").read_text())
    return np.array([named[n] for n in NAMES])


def disk_bytes(root: Path) -> int:
    """Bytes of every file under `root`."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
