"""What the study examples report after a run: the seconds spent in training steps
(`StepTimer`: the device's on CUDA), the last validation's loss and tails, the JSON
summary's common keys (`run_summary`), and the lines they print (how an error compares
with a baseline's, the samples refused, how simulation and training overlapped).

Part of `study_common` (which re-exports every name here): an example imports them from
there, after adding this folder to `sys.path`.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from melissa_trainer import Hook, OnlineTrainer
from melissa_trainer.launcher import AdaptiveSampler, Launcher
from melissa_trainer.launcher.sampler_account import drawn_by
from melissa_trainer.launcher.steering import steered_draws
from melissa_trainer.trainer.held_out import HELD_OUT_FILE

__all__ = [
    "StepTimer",
    "adaptive_summary",
    "compared",
    "final_eval_loss",
    "final_eval_tails",
    "print_overlap",
    "print_refused",
    "received_samples",
    "run_summary",
    "sequential_seconds",
]


class StepTimer(Hook):
    """Seconds this rank spends in training steps (batch processing, forward, backward,
    optimizer), not waiting for data, validating or saving; and the checkpoint the run
    resumed from, if any (`resumed_from`).

    On a CUDA device the seconds are the device's: under CUDA's asynchronous execution
    the host returns from a step once it has queued the step's kernels, so its clock
    would count the time spent issuing them, not running them. A pair of CUDA events is
    recorded on the current stream at each STEP_START and STEP_END, and the pairs are
    read a window (`window` steps) later: one wait per window, on an event the device
    has normally run long before (it runs at most a few steps behind the host), never a
    host sync per step. Reading `seconds` reads what is left (a wait for the last step:
    read it after training). Elsewhere the host's wall clock, as on a CPU the step has
    ended when the call returns. `reads` counts the waits."""

    def __init__(self, window: int = 64) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1 step, not {window}")
        self.window = window
        self.resumed_from: str | None = None
        self.reads = 0
        self._wall = 0.0  # seconds, off CUDA
        self._device_ms = 0.0  # milliseconds of device time read so far, on CUDA
        self._cuda: bool | None = None  # decided at the first step (the trainer's device)
        self._start = 0.0
        self._open: Any = None  # the step in progress's start event
        self._window: list[tuple[Any, Any]] = []  # this window's (start, end) events
        self._previous: list[tuple[Any, Any]] = []  # the window before: read at this one's end
        self._free: list[Any] = []  # events read, recorded again (none made per step)

    @property
    def seconds(self) -> float:
        """The seconds in steps so far (on CUDA, after waiting for the last step)."""
        self._read(self._previous)
        self._read(self._window)
        return self._wall + self._device_ms / 1000.0

    def on_load(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        self.resumed_from = path

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        if self._cuda is None:
            self._cuda = torch.device(trainer.accelerator.device).type == "cuda"
        if self._cuda:
            self._open = self._record()
        else:
            self._start = time.perf_counter()

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if not self._cuda:
            self._wall += time.perf_counter() - self._start
            return
        if self._open is None:  # (a STEP_END without its STEP_START: nothing to time)
            return
        self._window.append((self._open, self._record()))
        self._open = None
        if len(self._window) >= self.window:
            self._read(self._previous)  # a window old: done, normally, so no wait
            self._previous, self._window = self._window, self._previous

    def _record(self) -> Any:
        """An event recorded now on the current CUDA stream (a reused one if any)."""
        event = self._free.pop() if self._free else torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _read(self, pairs: list[tuple[Any, Any]]) -> None:
        """Add the device time of `pairs` (recorded in stream order): one wait, for the
        last end event, after which every event of `pairs` has run and reads at once."""
        if not pairs:
            return
        pairs[-1][1].synchronize()
        self.reads += 1
        for start, end in pairs:
            self._device_ms += start.elapsed_time(end)
            self._free += (start, end)
        pairs.clear()


def final_eval_loss(trainer: OnlineTrainer) -> float:
    """The validation loss at the last step (the FlowHook asks for a validation at the end)."""
    step = trainer.state.global_step
    for logs in reversed(trainer.state.log_history):
        if "eval_loss" in logs and logs["step"] == step:
            return float(logs["eval_loss"])
    return float(trainer.evaluate()["eval_loss"])


def final_eval_tails(trainer: OnlineTrainer, scale: float = 1.0) -> dict[str, float]:
    """The last validation's per-simulation tails, times `scale`: ``p99`` and ``max`` of
    the held-out simulations' mean losses (`melissa_trainer.trainer.simulation_errors`:
    the validation samples carry their simulation id); empty when it has none."""
    for logs in reversed(trainer.state.log_history):
        if "eval_loss" in logs:
            if "eval_loss_max" not in logs:
                return {}
            return {"p99": logs["eval_loss_p99"] * scale, "max": logs["eval_loss_max"] * scale}
    return {}


def received_samples(trainer: OnlineTrainer, key: str = "samples_put") -> int:
    """Samples the receivers put into the buffers (or another of their counters),
    summed over ranks (the last log's)."""
    for logs in reversed(trainer.state.log_history):
        if f"source_{key}" in logs:
            return int(logs[f"source_{key}"])
    return 0


def sequential_seconds(simulation: float | None, training: float, job_limit: int) -> float | None:
    """The time simulating first (`job_limit` at a time), then training, would take,
    estimated from this run's runs: their wall times count their waits on training's
    back-pressure, so where training paced them it is too much, not a bound (a user
    trial: 48 runs of 93.4 s in all, 22.4 s with --sample_to_insert_ratio 0)."""
    return None if simulation is None else round(simulation / job_limit + training, 2)


def written_held_out(trainer: OnlineTrainer) -> Path | None:
    """``{output_dir}/held_out_losses.csv`` when it holds the last validation's losses
    (its rows' step is `trainer.held_out_losses`'): None when no validation made them, or
    the file could not be written (a WARNING said so; an earlier run's file may be there)."""
    losses = getattr(trainer, "held_out_losses", None)
    if losses is None:
        return None
    path = Path(trainer.args.output_dir) / HELD_OUT_FILE
    try:
        with path.open(newline="") as file:
            first = next(csv.DictReader(file), None)
    except OSError:
        return None
    return path if first is not None and first.get("step") == str(losses.step) else None


def run_summary(
    trainer: OnlineTrainer,
    launcher: Launcher | None,
    training_seconds: float,
    wall: float,
    job_limit: int,
    resumed_from: str | None = None,
) -> dict[str, Any]:
    """The JSON summary's keys every example has: timings, counts, the study's files
    (``draws_csv``: the launcher's `draws_path`, each draw and its losses;
    ``held_out_csv``: the last validation's per-held-out-simulation losses,
    `melissa_trainer.trainer.held_out`; None where there is none), and "plot" (None).
    After a resume (`resumed_from`), the launcher's times and counts span both runs, and
    `sequential_seconds` is None (not measured, as `print_overlap` says: the earlier
    run's simulation time against this run's training would be neither run's figure)."""
    study: dict[str, float] = launcher.summary() if launcher is not None else {}
    draws = None if launcher is None else launcher.draws_path
    held_out = written_held_out(trainer)
    simulation = study.get("simulation_seconds")
    sequential = None if resumed_from is not None else simulation
    return {
        "wall_seconds": round(wall, 2),
        "simulation_seconds": None if simulation is None else round(simulation, 2),
        "training_seconds": round(training_seconds, 2),  # this rank's (its GPU's on CUDA)
        "sequential_seconds": sequential_seconds(sequential, training_seconds, job_limit),
        "samples_seen": trainer.state.total_samples_seen,  # all ranks, with re-draws
        "samples_received": received_samples(trainer),  # all ranks, each once
        # samples holding NaN or Inf, dropped by the receivers (nonfinite="refuse")
        "samples_refused_nonfinite": received_samples(trainer, "nonfinite_refused"),
        "steps": trainer.state.global_step,
        "simulations_finished": study.get("finished"),
        "study": study,  # the launcher's counts (empty in external mode)
        "resumed_from": resumed_from,  # a checkpoint: the study's figures span both runs
        # each draw, how it was drawn and its observed losses (None: no launcher here)
        "draws_csv": None if draws is None else str(draws),
        # the last validation's loss and parameters per held-out simulation, worst first
        "held_out_csv": None if held_out is None else str(held_out),
        "plot": None,
    }


def compared(baseline: float, ours: float) -> str:
    """How an error `ours` compares with a baseline's: ``"3.7x better"`` when lower,
    ``"21.4x worse"`` when higher (a ratio below 1 printed as "better" read as a win:
    "0.0x better" for a model 20 times worse than the mean field)."""
    if not (math.isfinite(ours) and math.isfinite(baseline)):
        return "not comparable: an error is not finite"
    if ours <= baseline:
        return f"{baseline / ours:.1f}x better" if ours > 0 else "exact"
    return f"{ours / baseline:.1f}x worse" if baseline > 0 else "worse than an exact baseline"


def print_refused(summary: Mapping[str, Any], nonfinite: str) -> None:
    """Say how many samples the receivers refused for NaN or Inf (nothing if none), under
    the `nonfinite` policy in effect ("refuse" drops them, "fail" also fails their
    simulations)."""
    refused = summary.get("samples_refused_nonfinite") or 0
    if refused:
        what = "and failed the simulations that sent them " if nonfinite == "fail" else ""
        print(
            f"refused {refused} samples holding NaN or Inf {what}(--nonfinite {nonfinite}); "
            "the receiver's log names their simulations and time steps"
        )


def print_overlap(
    study: Mapping[str, float],
    wall: float,
    training_seconds: float,
    job_limit: int,
    resumed_from: str | None = None,
) -> None:
    """Print how much simulation and training overlapped: the run's wall time against
    what the same work would take one stage after the other (`sequential_seconds`'s
    estimate: the runs' wall times count their waits on training), simulating first
    (`job_limit` at a time: the runs' summed wall times over `job_limit`) and training
    after (`sequential_seconds`, the JSON summary's figure). Nothing without a
    launcher; after a resume, why not: the study's times span the earlier run too.
    (A user trial could not read the line it replaces, which gave two sequential totals,
    simulation + training with the runs one at a time and with them `job_limit` at a
    time, and said which neither was.)"""
    simulation = study.get("simulation_seconds")
    if simulation is None:
        return
    runs = f"{study.get('finished', 0):.0f} runs"
    # (the seconds count every ended attempt, a failed one too: a user trial's study of
    # 4 finished runs and 3 failed attempts read "4 runs of 10.2 s in all")
    failed = study.get("failed", 0) + study.get("restarts", 0)
    if failed:
        runs += f" finished and {failed:.0f} that failed"
    if resumed_from is not None:
        print(
            f"overlap: not measured for a run resumed from {resumed_from}: the study's "
            f"{simulation:.1f} s of simulation ({runs}) span the earlier run too"
        )
        return
    sequential = sequential_seconds(simulation, training_seconds, job_limit)
    print(
        f"overlap: {wall:.1f} s wall, against {sequential:.1f} s one stage after the other: "
        f"{simulation / job_limit:.1f} s to simulate ({runs}{', ' if failed else ' of '}"
        f"{simulation:.1f} s in all, "
        f"{job_limit} at a time; their wall times, waits on training's back-pressure "
        f"included), then {training_seconds:.1f} s to train"
    )


def adaptive_summary(launcher: Launcher | None) -> dict[str, Any] | None:
    """An adaptive sampler's draws: how many, how many explored (not steered by the
    losses), how many simulations it observed, how many of their losses it held at its
    last draw (below its `min_observations`, none of its draws could adapt: the study's
    account warns of it), how many draws held enough losses to adapt
    (`adaptive_draws`) and how many the losses steered (`steered`: Breed's bred draws,
    the density sampler's draws the loss bent; none with losses in time: the account
    warns of it), and how its draws were made in its own terms (`drawn_by`); None for
    a fixed design, or on ranks that do not run the launcher."""
    sampler = None if launcher is None else launcher.sampler
    if not isinstance(sampler, AdaptiveSampler) or sampler.position == 0:
        return None
    return {
        "draws": sampler.position,
        "explored": int(getattr(sampler, "explored", sampler.position)),
        "observed": len(sampler.observations),
        "observed_at_last_draw": sampler.observed_at_draw,  # (None: no draw in this run)
        "adaptive_draws": sampler.adaptive_draws,  # (None: resumed from an older state)
        "steered": steered_draws(sampler),
        "drawn_by": drawn_by(sampler),
    }
