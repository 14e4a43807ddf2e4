"""The offline pipeline of `online_vs_offline.py`: simulate, write, then train.

`simulate_offline` runs the ensemble (the `Launcher`, the heat solver's ``--save_npy``
mode: one ``.npy`` of shape (time_steps, n, n) per simulation and a JSON of its
parameters); `train_offline` trains with a standard `torch.utils.data.DataLoader` over
the memory-mapped files, shuffled every epoch. The shared parts (model, features,
learning-rate rule, validation) are `heat_pipelines`'.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from heat_pipelines import (
    POLL,
    SOLVER,
    Run,
    Setup,
    Tracker,
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
    data = workdir / "data"
    data.mkdir(parents=True)
    command = [sys.executable, str(SOLVER), *setup.config.argv()]
    command += ["--save_npy", str(data / "sim-{simulation_id:06d}.npy")]
    launcher = Launcher(
        command,
        design(setup, n_simulations),
        n_simulations,
        job_limit=setup.sim_jobs,
        env={"OMP_NUM_THREADS": "1"},
        # a killed run at the deadline is no failure
        tuning=LauncherTuning(poll_interval=POLL, min_finished_fraction=1e-9),
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
) -> Run:
    """Train on `files` for `epochs` or for `duration` s (whichever is given).

    `start_time`: when this training phase starts in the pipeline's clock (after its
    simulations): curve times and validation instants are on that clock.
    """
    assert (epochs is None) != (duration is None), "give epochs or duration"
    torch.set_num_threads(setup.torch_threads)
    dataset = NpyDataset(files, setup.time_steps)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=setup.batch_size,
        shuffle=True,
        num_workers=setup.loader_workers,
        persistent_workers=setup.loader_workers > 0,
        generator=torch.Generator().manual_seed(setup.seed),
    )
    model = make_model(setup)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    tracker = Tracker(*validation, eval_every, start=start_time)
    total_steps = (epochs or 0) * len(loader)
    steps = epoch = 0
    t0 = time.perf_counter()
    while epochs is None or epoch < epochs:
        for x, y in loader:
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
            tracker.maybe(model)
        else:
            epoch += 1
            continue
        break  # the time budget ran out within the epoch
    train_seconds = time.perf_counter() - t0
    run = new_run(
        "offline train",
        steps=steps,
        epochs=round(steps / max(len(loader), 1), 2),
        samples_seen=steps * setup.batch_size,
        simulations=len(files),
        train_seconds=round(train_seconds, 3),
    )
    return finish(run, tracker, model, start_time + train_seconds)
