"""The two pipelines `online_vs_offline.py` compares, on the heat example's solver:
what both share, and the online one (the offline one is `heat_offline`).

* Offline, the classic way: `simulate_offline` runs the ensemble (the `Launcher`, the
  solver's ``--save_npy`` mode: one ``.npy`` of shape (time_steps, n, n) per simulation
  and a JSON of its parameters), then `train_offline` trains on them, shuffled every
  epoch: read once into memory when they fit (here always), else a standard
  `torch.utils.data.DataLoader` over the memory-mapped files (`heat_offline`).
* Online: `run_online` streams the same solver into `OnlineTrainer` (reservoir buffer,
  batches made by a vectorized `process_batch`: `batch_features`, which offline's
  in-memory tensors are made by too) while the simulations run; `stream_alone` is its
  simulation half alone (streamed, received, dropped) and `train_from_memory` its
  training half alone, the same trainer on samples already in memory.

Both train the same model with the same optimizer, batch size, seed and learning-rate
rule (cosine decay over the run's progress: its share of a sample budget, or of a time
budget), and are validated with the same function on the same held-out simulations,
never streamed nor stored, at the same wall-clock times. Every function returns a
`Run` dict (see `new_run`); times are seconds of `time.perf_counter()`.

The parameters are the heat example's five temperatures and the diffusivity
(``log2_alpha`` in [-2, 2]): the field is linear in the temperatures, not in alpha.
Training simulations follow one scrambled Halton sequence (any prefix of it covers the
space evenly), so online and offline draw the same simulations in the same order.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
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

from melissa_trainer import (  # noqa: E402
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.buffers import BufferConfig, SampleBlock, make_buffer  # noqa: E402
from melissa_trainer.hooks import budget_factor  # noqa: E402
from melissa_trainer.launcher import (  # noqa: E402
    Launcher,
    LauncherTuning,
    LocalBackend,
    Placement,
    make_sampler,
)

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


class _Online(Hook):
    """The learning-rate rule, the validations on the clock and the time budget."""

    def __init__(
        self, setup: Setup, tracker: Tracker, progress: Callable[[Any], float], budget: float | None
    ) -> None:
        self.setup, self.tracker, self.progress, self.budget = setup, tracker, progress, budget
        self.loop_end = math.nan
        self.first_step = math.nan  # when the first step ended (s since train())
        # the process's CPU time then and at the loop's end (s): a rate that other
        # processes on a busy machine disturb less than the wall clock's
        self.cpu_first = self.cpu_end = math.nan

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        lr = learning_rate(self.setup, self.progress(state))
        for group in trainer.optimizer.param_groups:
            group["lr"] = lr

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == 1:
            self.first_step = self.tracker.elapsed()
            self.cpu_first = time.process_time()
        self.tracker.maybe(trainer.model)
        if self.budget is not None and self.tracker.elapsed() >= self.budget:
            control.should_stop = True

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.loop_end = self.tracker.elapsed()
        self.cpu_end = time.process_time()


def _trainer(setup: Setup, workdir: Path, source: Any, **overrides: Any) -> OnlineTrainer:
    """The online trainer of `setup` on `source`; `overrides`: `TrainingArguments`'."""
    args = TrainingArguments(
        output_dir=str(workdir / "trainer"),
        seed=setup.seed,
        batch_size=setup.batch_size,
        buffer="reservoir",
        buffer_size=setup.buffer_size,
        watermark=setup.watermark,
        logging_steps=10**9,  # no periodic logs: nothing but the training in the loop
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        **overrides,
    )
    model = make_model(setup)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    return OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=source,
        ingest_block=_ingest_features(setup.time_steps),
        process_batch=_gather_features,
    )


def _ingest_features(steps: int) -> Callable[[SampleBlock], dict[str, np.ndarray]]:
    """A block of streamed samples -> their features, once per sample where the source
    puts them (`OnlineTrainer(ingest_block=...)`), as offline computes its features once,
    before its loop: the reservoir stores them and a step only gathers
    (`_gather_features`). Each row is the per-batch mapping's own row (elementwise
    arithmetic), so the batches are the same bits as computing them at every draw."""

    def ingest_block(block: SampleBlock) -> dict[str, np.ndarray]:
        f = block.fields
        x, y = batch_features(f["parameters"], f["time_step"], f["temperature"], steps)
        return {"x": x.numpy(), "y": y.numpy()}

    return ingest_block


def _process_batch(steps: int) -> Callable[[SampleBlock], tuple]:
    """A drawn batch of raw samples -> (inputs, targets), mapped at the draw: the same
    rows as `_ingest_features` then `_gather_features` (the equal-steps script,
    `heat_equal_steps.py`, puts the raw samples and maps each batch with it)."""

    def process_batch(block: SampleBlock) -> tuple:
        f = block.fields
        return batch_features(f["parameters"], f["time_step"], f["temperature"], steps)

    return process_batch


def _gather_features(block: SampleBlock) -> tuple:
    """A drawn batch of stored features -> (inputs, targets): two gathered arrays."""
    return torch.from_numpy(block.fields["x"]), torch.from_numpy(block.fields["y"])


def _train(
    setup: Setup,
    trainer: OnlineTrainer,
    tracker: Tracker,
    progress: Callable[[Any], float],
    budget: float | None,
) -> tuple[float, Run]:
    hook = _Online(setup, tracker, progress, budget)
    trainer.hooks.add(hook)
    tracker.t0 = time.perf_counter()
    state = trainer.train()
    run = new_run("", steps=state.global_step, samples_seen=state.samples_seen)
    # the training rate once it runs: steps after the first over the time after it
    # (online's first step waits for the watermark's samples)
    after = hook.loop_end - hook.first_step
    run["steps_per_s"] = round((state.global_step - 1) / after, 2) if after > 0 else math.nan
    cpu = hook.cpu_end - hook.cpu_first  # (the process's: a receiver's work included)
    run["cpu_steps_per_s"] = round((state.global_step - 1) / cpu, 2) if cpu > 0 else math.nan
    return hook.loop_end, run


def _stream(setup: Setup, workdir: Path, n_simulations: int) -> tuple[Launcher, Study]:
    """The launcher running the streaming solver, and the study (the source) receiving it."""
    n = setup.grid_size
    launcher = Launcher(
        setup.solver_command(),
        design(setup, n_simulations),
        n_simulations,
        job_limit=setup.sim_jobs,
        tuning=LauncherTuning(poll_interval=POLL),
        **setup.launcher_options(),
    )
    stream = StreamSource(
        ReceiverConfig(
            rendezvous_dir=workdir / "rendezvous", fields={"temperature": ((n, n), "float32")}
        )
    )
    return launcher, Study(launcher, stream)


def stream_alone(setup: Setup, workdir: Path, n_simulations: int) -> Run:
    """Online's simulations alone: the same launcher, solvers and receiver, the samples
    drained from a FIFO buffer and dropped, no training: t_sim as online runs them
    (each simulation process also imports the client, connects and sends)."""
    setup.pin_training()
    launcher, source = _stream(setup, workdir, n_simulations)
    buffer = make_buffer(BufferConfig("fifo", setup.buffer_size))
    source.configure(str(workdir / "trainer"))
    drained = 0
    t0 = time.perf_counter()
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        while True:
            try:
                batch = buffer.get_batch(setup.batch_size, timeout=0.5)
            except TimeoutError:
                # ingests what has come, and raises if the study failed or the stream stalled
                source.wait_for(setup.batch_size, 0.01)
                continue
            if not batch:
                break
            drained += len(batch)
        wall = time.perf_counter() - t0
    finally:
        source.stop()
    return new_run(
        "online simulations alone",
        wall=round(wall, 3),
        simulations=int(launcher.summary().get("finished", 0)),
        samples_received=drained,
    )


def run_online(
    setup: Setup,
    workdir: Path,
    validation: tuple[torch.Tensor, torch.Tensor],
    *,
    n_simulations: int,
    ratio: float | None = None,
    budget: float | None = None,
    eval_every: float | None = None,
) -> Run:
    """Stream `n_simulations` (or as many as `budget` s allow) into `OnlineTrainer`.

    With `ratio`, training draws `ratio` samples per streamed sample (the buffer's
    rate limiter) and ends with the stream; with `budget`, it never waits for data
    (reservoir without a rate limit) and stops after `budget` s. The wall time runs
    from `train()` to the end of its loop (the source's shutdown is not counted).
    """
    setup.pin_training()
    torch.set_num_threads(setup.torch_threads)
    launcher, source = _stream(setup, workdir, n_simulations)
    # None: no rate limit (0; unset, TrainingArguments would give the reservoir 16)
    trainer = _trainer(setup, workdir, source, sample_to_insert_ratio=0 if ratio is None else ratio)
    tracker = Tracker(*validation, eval_every)
    if budget is not None:
        progress = lambda state: tracker.elapsed() / budget  # noqa: E731
    else:
        expected_steps = (ratio or 1.0) * n_simulations * setup.time_steps / setup.batch_size
        progress = lambda state: state.global_step / expected_steps  # noqa: E731
    wall, run = _train(setup, trainer, tracker, progress, budget)
    received = int(source.telemetry()["samples_put"])
    study = launcher.summary()
    run.update(
        pipeline="online",
        placement=setup.placement,
        simulations=int(study.get("finished", 0)),
        simulation_seconds=round(study.get("simulation_seconds", 0.0), 3),
        samples_received=received,
        bytes_streamed=received * setup.sample_bytes,
        bytes_on_disk=disk_bytes(workdir),
    )
    return finish(run, tracker, trainer.model, wall)


def train_from_memory(
    setup: Setup,
    workdir: Path,
    files: Sequence[str],
    validation: tuple[torch.Tensor, torch.Tensor],
    *,
    steps: int,
    ratio: float,
) -> Run:
    """Online's training half alone: the same trainer, buffer and `ratio` for at most
    `steps` steps, fed from samples already in memory (`files`, loaded before the
    clock) instead of the network."""
    setup.pin_training()
    torch.set_num_threads(setup.torch_threads)
    samples = []
    for f in files:
        vector = load_parameters(f)
        for step, field in enumerate(np.load(f)):
            # every field an array, as the receiver delivers them (the trainer's
            # reservoir then stores them by column, as it does the stream's)
            samples.append(
                {"temperature": field, "time_step": np.array(step), "parameters": vector}
            )
    trainer = _trainer(setup, workdir, samples, max_steps=steps, sample_to_insert_ratio=ratio)
    expected_steps = ratio * len(samples) / setup.batch_size
    tracker = Tracker(*validation, None)
    wall, run = _train(setup, trainer, tracker, lambda s: s.global_step / expected_steps, None)
    run.update(pipeline="online training alone", simulations=len(files))
    return finish(run, tracker, trainer.model, wall)
