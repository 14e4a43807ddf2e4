"""The offline pipeline of `online_vs_offline.py`: simulate, write, then train.

`simulate_offline` runs the ensemble (the `Launcher`, the heat solver's ``--save_npy``
mode: one ``.npy`` of shape (time_steps, n, n) per simulation and a JSON of its
parameters); `train_offline` trains on the files, shuffled every epoch, as a competent
offline pipeline would: when the data fits in memory (a quarter of the machine's, here
always) it is read once into two tensors (inputs and targets, the read inside the
timed training) and each batch is one index of them, with no per-sample Python and no
DataLoader (`loader="memory"`); otherwise a standard `torch.utils.data.DataLoader`
over the memory-mapped files (`loader="mmap"`, `Setup.loader_workers` workers). The
shared parts (model, features, learning-rate rule, validation) are `heat_shared`'.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from heat_shared import (
    POLL,
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
)

from melissa_trainer.launcher import Launcher, LauncherTuning


def simulate_offline(
    setup: Setup, workdir: Path, n_simulations: int, duration: float | None = None
) -> Run:
    """Run the ensemble, each simulation writing its .npy; stop after `duration` s
    (the running ones are killed and their partial files deleted) or when all finish.

    The run's "files" are ``[path, seconds after the start it was complete]``, oldest
    first: the data an offline pipeline stopping at time T has is the prefix up to T.
    """
    setup.pin_training()  # the launcher's loop: off the simulations' core
    data = workdir / "data"
    data.mkdir(parents=True)
    command = setup.solver_command()
    command += ["--save_npy", str(data / "sim-{simulation_id:06d}.npy")]
    launcher = Launcher(
        command,
        design(setup, n_simulations),
        n_simulations,
        job_limit=setup.sim_jobs,
        # a killed run at the deadline is no failure
        tuning=LauncherTuning(poll_interval=POLL, min_finished_fraction=1e-9),
        **setup.launcher_options(),
    )
    t0_wall, t0 = time.time(), time.perf_counter()
    launcher.start(workdir / "rendezvous", study_dir=workdir)
    try:
        while not launcher.done:
            launcher.check()
            if duration is not None and time.perf_counter() - t0 >= duration:
                break
            time.sleep(0.005)
        elapsed = time.perf_counter() - t0
    finally:
        launcher.stop()
    for partial in data.glob("*.partial"):
        partial.unlink()
    files = sorted((p.stat().st_mtime - t0_wall, str(p)) for p in data.glob("*.npy"))
    return new_run(
        "offline simulate",
        wall=round(elapsed, 3),
        simulations=len(files),
        files=[[path, round(t, 3)] for t, path in files],
        bytes_on_disk=disk_bytes(data),
    )


def load_in_memory(files: Sequence[str], steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of every time step of every file, as `features` makes them
    (rows in file order, then step order), in two tensors."""
    xs, ys = [], []
    for f in files:
        fields = np.load(f)
        parameters = np.repeat(load_parameters(f)[None], len(fields), axis=0)
        x, y = batch_features(parameters, np.arange(len(fields)), fields, steps)
        xs.append(x)
        ys.append(y)
    return torch.cat(xs), torch.cat(ys)


def fits_in_memory(files: Sequence[str]) -> bool:
    """Whether the files' data takes at most a quarter of this machine's memory."""
    total = sum(os.path.getsize(f) for f in files)
    return total <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 4


class MemoryBatches:
    """Shuffled batches of in-memory tensors: an epoch is one pass over a new
    permutation drawn from `generator` (the last batch may be smaller, as a DataLoader's
    without ``drop_last``)."""

    def __init__(
        self, x: torch.Tensor, y: torch.Tensor, batch_size: int, generator: torch.Generator
    ) -> None:
        self.x, self.y, self.batch_size, self.generator = x, y, batch_size, generator

    def __len__(self) -> int:
        return math.ceil(len(self.x) / self.batch_size)

    def __iter__(self):
        order = torch.randperm(len(self.x), generator=self.generator)
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            yield self.x[index], self.y[index]


class NpyDataset(torch.utils.data.Dataset):
    """(inputs, target) of every time step of every file, memory-mapped."""

    def __init__(self, files: Sequence[str], steps: int) -> None:
        self.steps = steps
        self.fields = [np.load(f, mmap_mode="r") for f in files]
        self.parameters = [load_parameters(f) for f in files]

    def __len__(self) -> int:
        return len(self.fields) * self.steps

    def __getitem__(self, index: int) -> tuple:
        sim, step = divmod(index, self.steps)
        return features(self.parameters[sim], step, self.fields[sim][step], self.steps)


def train_offline(
    setup: Setup,
    files: Sequence[str],
    validation: tuple[torch.Tensor, torch.Tensor],
    *,
    epochs: int | None = None,
    duration: float | None = None,
    start_time: float = 0.0,
    eval_every: float | None = None,
    loader: str | None = None,
) -> Run:
    """Train on `files` for `epochs` or for `duration` s (whichever is given).

    `start_time`: when this training phase starts in the pipeline's clock (after its
    simulations): curve times and validation instants are on that clock. `loader`:
    "memory" or "mmap" (see the module docstring); None: "memory" if the data fits.
    """
    assert (epochs is None) != (duration is None), "give epochs or duration"
    setup.pin_training()
    torch.set_num_threads(setup.torch_threads)
    loader = loader or ("memory" if fits_in_memory(files) else "mmap")
    model = make_model(setup)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    tracker = Tracker(*validation, eval_every, start=start_time)
    t0 = time.perf_counter()  # the read into memory is part of the training's time
    generator = torch.Generator().manual_seed(setup.seed)
    batches: Any
    if loader == "memory":
        batches = MemoryBatches(*load_in_memory(files, setup.time_steps), setup.batch_size,
                                generator)  # fmt: skip
    elif loader == "mmap":
        batches = torch.utils.data.DataLoader(
            NpyDataset(files, setup.time_steps),
            batch_size=setup.batch_size,
            shuffle=True,
            num_workers=setup.loader_workers,
            persistent_workers=setup.loader_workers > 0,
            generator=generator,
        )
    else:
        raise ValueError(f"loader={loader!r}: 'memory' or 'mmap'")
    total_steps = (epochs or 0) * len(batches)
    steps = epoch = 0
    # after the first step (as online's rates): the wall clock and the process's CPU time
    first_wall = first_cpu = math.nan
    while epochs is None or epoch < epochs:
        for x, y in batches:
            spent = time.perf_counter() - t0
            if duration is not None and spent >= duration:
                break
            progress = steps / total_steps if epochs else spent / (duration or 1.0)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(setup, progress)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
            if steps == 1:
                first_wall, first_cpu = time.perf_counter(), time.process_time()
            tracker.maybe(model)
        else:
            epoch += 1
            continue
        break  # the time budget ran out within the epoch
    train_seconds = time.perf_counter() - t0
    after, cpu = time.perf_counter() - first_wall, time.process_time() - first_cpu
    run = new_run(
        "offline train",
        steps=steps,
        epochs=round(steps / max(len(batches), 1), 2),
        loader=loader,
        samples_seen=steps * setup.batch_size,
        simulations=len(files),
        train_seconds=round(train_seconds, 3),
        # steps after the first over the time after it, as online's `steps_per_s`
        steps_per_s=round((steps - 1) / after, 2) if after > 0 else math.nan,
        cpu_steps_per_s=round((steps - 1) / cpu, 2) if cpu > 0 else math.nan,
    )
    return finish(run, tracker, model, start_time + train_seconds)
