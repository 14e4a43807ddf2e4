"""The online pipeline `online_vs_offline.py` compares, on the heat example's solver
(what both pipelines share is `heat_shared`, re-exported here; the offline one is
`heat_offline`).

* Offline, the classic way: `simulate_offline` runs the ensemble (the `Launcher`, the
  solver's ``--save_npy`` mode: one ``.npy`` of shape (time_steps, n, n) per simulation
  and a JSON of its parameters), then `train_offline` trains on them, shuffled every
  epoch: read once into memory when they fit (here always), else a standard
  `torch.utils.data.DataLoader` over the memory-mapped files (`heat_offline`).
* Online: `run_online` streams the same solver into `OnlineTrainer` (reservoir buffer,
  each sample's features computed once where it is received, `ingest_features`, and a
  batch gathered from them, `gather_features`; `make_process_batch` maps a raw batch
  to the same rows) while the simulations run; `stream_alone` is its simulation half
  alone (streamed, received, dropped) and `train_from_memory` its training half alone,
  the same trainer (`online_trainer`) on samples already in memory.

Every function returns a `Run` dict (`heat_shared.new_run`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from heat_shared import (  # re-exported: the benchmarks and tests read them as hp.X
    BOUNDS,
    CENTER,
    EXAMPLE,
    NAMES,
    POLL,
    SCALE,
    SOLVER,
    HeatConfig,
    Run,
    Setup,
    Tracker,
    batch_features,
    design,
    disk_bytes,
    features,
    finish,
    learning_rate,
    load_parameters,
    make_model,
    new_run,
    per_simulation_mse,
    solve,
    validation_mse,
    validation_set,
)

from melissa_trainer import (
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.buffers import BufferConfig, SampleBlock, make_buffer
from melissa_trainer.launcher import Launcher, LauncherTuning

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
    "gather_features",
    "ingest_features",
    "learning_rate",
    "load_parameters",
    "make_model",
    "make_process_batch",
    "new_run",
    "online_trainer",
    "per_simulation_mse",
    "run_online",
    "solve",
    "stream_alone",
    "train_from_memory",
    "validation_mse",
    "validation_set",
]


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


def online_trainer(setup: Setup, workdir: Path, source: Any, **overrides: Any) -> OnlineTrainer:
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
        ingest_block=ingest_features(setup.time_steps),
        process_batch=gather_features,
    )


def ingest_features(steps: int) -> Callable[[SampleBlock], dict[str, np.ndarray]]:
    """A block of streamed samples -> their features, once per sample where the source
    puts them (`OnlineTrainer(ingest_block=...)`), as offline computes its features once,
    before its loop: the reservoir stores them and a step only gathers
    (`gather_features`). Each row is the per-batch mapping's own row (elementwise
    arithmetic), so the batches are the same bits as computing them at every draw."""

    def ingest_block(block: SampleBlock) -> dict[str, np.ndarray]:
        f = block.fields
        x, y = batch_features(f["parameters"], f["time_step"], f["temperature"], steps)
        return {"x": x.numpy(), "y": y.numpy()}

    return ingest_block


def make_process_batch(steps: int) -> Callable[[SampleBlock], tuple]:
    """A drawn batch of raw samples -> (inputs, targets), mapped at the draw: the same
    rows as `ingest_features` then `gather_features` (the equal-steps script,
    `heat_equal_steps.py`, puts the raw samples and maps each batch with it)."""

    def process_batch(block: SampleBlock) -> tuple:
        f = block.fields
        return batch_features(f["parameters"], f["time_step"], f["temperature"], steps)

    return process_batch


def gather_features(block: SampleBlock) -> tuple:
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
    trainer = online_trainer(
        setup, workdir, source, sample_to_insert_ratio=0 if ratio is None else ratio
    )
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
    trainer = online_trainer(setup, workdir, samples, max_steps=steps, sample_to_insert_ratio=ratio)
    expected_steps = ratio * len(samples) / setup.batch_size
    tracker = Tracker(*validation, None)
    wall, run = _train(setup, trainer, tracker, lambda s: s.global_step / expected_steps, None)
    run.update(pipeline="online training alone", simulations=len(files))
    return finish(run, tracker, trainer.model, wall)


# the names before `heat_shared` was split off, for a script that still uses them
_trainer, _ingest_features = online_trainer, ingest_features
_process_batch, _gather_features = make_process_batch, gather_features
