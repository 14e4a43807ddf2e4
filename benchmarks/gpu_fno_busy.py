"""Case (b) of issue 42 for `benchmarks/gpu.py`: the GPU kept busy by the stream, with the
Navier–Stokes example's FNO of `gpu_fno` at 256^2.

``fno_busy``: the GPU's busy fraction (NVML utilisation sampled every 0.1 s, as the
``busy`` row does: `gpu_common.Sampler`) while `job_limit` simulations of
`examples/navier_stokes/solver.py` stream 256^2 fields into that FNO, trained by the
example's own ``main`` (its launcher, receiver, device reservoir, process_batch),
over a window of `WINDOW_S` seconds of steady state; then the same model's busy
fraction in `gpu_fno.HandLoop`, on device-resident data. Two rows: ours alone
(against 1.0, the GPU busy all the time; target 0.90) and ours against the hand
loop's (target 0.95).

What makes the window steady (`stream_flags`): a reservoir without rate limit
(``sample_to_insert_ratio 0``: training never waits for the stream, it re-draws what the
reservoir holds while the simulations replace it); the window opens once the reservoir
is full (1,024 samples) and training has run `WARMUP_S` seconds (at the latest
`MAX_WARMUP_S`), and it must close while the simulations still stream (else the case
fails, saying so): 2,000 simulations, ``job_limit`` = `usable_cores` less 4 (the trainer's
main thread, its receiver, the launcher, the meter), 24 fields each. The fields come
every 0.125 time units (20 solver steps of dt 0.00625: 4x the example's default rate,
so that the receiver has work). `benchmarks/fno_feed.py` measured the solver at ~8 ms of
CPU per step at 256^2 on the development machine: a simulation sends ~6 fields/s, 12 of
them ~75 messages of 512 KB per second; it estimated the FNO's step from the bytes it
moves (>= 31 GB at batch 16, memory-bound) at ~12 ms on an H100 SXM and ~8 ms on an H200,
drawing 1,400 to 2,000 samples/s: one fresh sample per draw would take 220 to 320
simulations at this interval (880 to 1,260 at the example's default), 14 to 20 nodes of
16 cores, which is why the reservoir re-draws. ``buffer_device accelerator`` and the
default ``stage_batches``: the example's GPU settings (docs/how-to/neural-operator.md).

`run_example` (``python benchmarks/gpu_fno_busy.py --example-worker RESULT -- FLAGS``) also
serves `benchmarks/gpu_check.py`: the example for a fixed time, stopped by a hook, then
its usual end (validation against the baselines, the PNG, its JSON summary).

Under ``--smoke`` (CPU, for the tests): 16^2, width 8, a 2 s window, 2 simulations;
no utilisation meter, so the busy rows are left out (said on stderr), but the example
runs, streams and trains through the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from gpu_common import Bench, Sampler, row, usable_cores, utilisation_meter
from gpu_fno import HandLoop, Size, load_example, make_samples, size_of
from trainer_overhead import synchronize

from melissa_trainer.common.json_output import to_json

#: the busy window: seconds of steady state measured, warm-up before it (and its cap)
WINDOW_S, WARMUP_S, MAX_WARMUP_S = 60.0, 10.0, 45.0
#: seconds the hand loop's busy fraction is measured (after 2 s untimed)
BASELINE_S = 10.0


def stream_flags(smoke: bool, job_limit: int) -> list[str]:
    """The example's flags for the busy case (see the module docstring)."""
    s = size_of(smoke)
    grid_flags = (
        ["--dt", "0.05", "--interval", "0.1", "--time_steps", "20", "--num_simulations", "40",
         "--buffer_size", "64", "--watermark", "8"]
        if smoke
        else ["--dt", "0.00625", "--interval", "0.125", "--time_steps", "24",
              "--num_simulations", "2000", "--buffer_size", "1024", "--watermark", "256"]
    )  # fmt: skip
    return [
        "--grid_size", str(s.grid), "--width", str(s.width), "--modes", str(s.modes),
        "--layers", str(s.layers), "--batch_size", str(s.batch), *grid_flags,
        "--job_limit", str(job_limit), "--mixed_precision", "bf16",
        "--buffer_device", "accelerator", "--sample_to_insert_ratio", "0",
        "--num_validation", "1", "--no_plot", "--eval_steps", "none",
        "--save_at_end", "false", "--report_to", "none", "--disable_progress_bar",
    ]  # fmt: skip


def run_example(
    flags: list[str], warmup_s: float, window_s: float, max_warmup_s: float, meter: Any
) -> dict[str, Any]:
    """The example's ``main(flags)`` in this process, its training stopped by a hook
    `window_s` seconds after a window opens: once the reservoir is full and training has
    run `warmup_s` seconds, or at `max_warmup_s` (the device synchronised at both ends).
    Returns the example's summary with ``window``: its seconds, steps, samples put into
    the buffer, whether the reservoir was full at its start, and (with `meter`) the GPU
    busy fraction inside it; ``complete`` False if training ended first (the stream ran
    out: the window is then what there was of it, up to the end of training)."""
    ns = load_example()
    sampler = Sampler(meter) if meter is not None else None
    window: dict[str, Any] = {}

    class Windowed(ns.StepTimer):  # type: ignore[name-defined,misc]
        def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_train_start(trainer, state, control)
            window["train_start"] = time.perf_counter()

        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_step_end(trainer, state, control)
            now = time.perf_counter()
            if "start" not in window:
                ran = now - window["train_start"]
                stats = trainer.buffer.stats()
                full = stats.size >= stats.capacity
                if ran >= warmup_s and (full or ran >= max_warmup_s):
                    synchronize(trainer.accelerator.device)
                    window.update(
                        start=time.perf_counter(), start_step=state.global_step,
                        start_put=stats.put, full=full,
                    )  # fmt: skip
            elif "end" not in window and now - window["start"] >= window_s:
                synchronize(trainer.accelerator.device)
                window.update(
                    end=time.perf_counter(), end_step=state.global_step,
                    end_put=trainer.buffer.stats().put,
                )  # fmt: skip
                control.should_stop = True

        def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
            super().on_loop_end(trainer, state, control)
            if "end" in window:
                return
            # training ended first (the stream ran out): the window is what there was,
            # the whole of training if it never opened
            synchronize(trainer.accelerator.device)
            if "start" not in window:
                window.update(start=window["train_start"], start_step=0, start_put=0, full=False)
            window.update(
                end=time.perf_counter(), end_step=state.global_step,
                end_put=trainer.buffer.stats().put, complete=False,
            )  # fmt: skip

    previous = ns.StepTimer
    ns.StepTimer = Windowed
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            summary = ns.main(flags)
    finally:
        ns.StepTimer = previous
        if sampler is not None:
            sampler.stop()
    seconds = max(window["end"] - window["start"], 1e-9)
    summary["window"] = {
        "complete": window.get("complete", True),
        "seconds": round(seconds, 2),
        "steps": window["end_step"] - window["start_step"],
        "steps_per_s": round((window["end_step"] - window["start_step"]) / seconds, 3),
        "samples_put": window["end_put"] - window["start_put"],
        "reservoir_full_at_start": window["full"],
        "busy": None if sampler is None else sampler.busy(window["start"], window["end"]),
    }
    summary["printed"] = printed.getvalue()
    return summary


def hand_busy(size: Size, device: torch.device, seconds: float, meter: Any) -> dict[str, Any]:
    """The hand loop on device-resident data for `seconds` (after 2 s untimed): its
    steps/s and, with `meter`, the GPU's busy fraction."""
    loop = HandLoop(size, make_samples(size), device, 0)
    loop.run(3)
    synchronize(device)
    sampler = Sampler(meter) if meter is not None else None
    start, steps = time.perf_counter(), 0
    warm = start + min(2.0, seconds / 2)
    timed = None
    while True:
        now = time.perf_counter()
        if timed is None and now >= warm:
            synchronize(device)
            timed, steps = time.perf_counter(), 0
        if timed is not None and now - timed >= seconds:
            break
        loop.run(10)
        steps += 10
    synchronize(device)
    end = time.perf_counter()
    busy = None
    if sampler is not None:
        sampler.stop()
        busy = sampler.busy(timed, end)
    return {"busy": busy, "steps_per_s": round(steps / (end - timed), 3)}


def busy_worker(result: str, smoke: bool) -> None:
    """In a process of its own: the example streaming into the FNO, then the hand loop;
    `result` gets both as JSON."""
    device = torch.device("cuda" if torch.cuda.is_available() and not smoke else "cpu")
    meter = utilisation_meter(device)
    job_limit = 2 if smoke else max(1, usable_cores() - 4)
    timing = (0.5, 2.0, 2.0) if smoke else (WARMUP_S, WINDOW_S, MAX_WARMUP_S)
    with tempfile.TemporaryDirectory(prefix="mt-gpu-fno-busy-") as out:
        flags = [*stream_flags(smoke, job_limit), "--output_dir", out]
        summary = run_example(flags, *timing, meter)
    if not summary["window"]["complete"]:
        raise RuntimeError(
            f"training ended ({summary['steps']} steps) before the window's end: the "
            "stream ran out before a steady state was measured (more --num_simulations)"
        )
    hand = hand_busy(size_of(smoke), device, 1.0 if smoke else BASELINE_S, meter)
    summary.pop("printed")
    got = {"streaming": summary, "hand": hand, "job_limit": job_limit}
    Path(result).write_text(to_json(got))


def busy_rows(got: dict[str, Any], grid: int) -> list[dict[str, Any]]:
    """The two busy rows from `busy_worker`'s result; none without a meter's figures."""
    ours, base = got["streaming"]["window"]["busy"], got["hand"]["busy"]
    if ours is None or base is None:
        return []
    name = f"GPU busy while simulations stream {grid}^2 into the FNO"
    return [
        row(f"{name} (vs always)", ours, 1.0, "fraction", 0.9),
        row(f"{name} vs hand loop (device data)", ours, base, "fraction", 0.95),
    ]


def case_fno_busy(bench: Bench) -> list[dict[str, Any]]:
    """The busy rows, from `busy_worker` in a subprocess (its own cores, CUDA context and
    example modules); what the window held is said on stderr."""
    with tempfile.TemporaryDirectory(prefix="mt-gpu-") as tmp:
        result = Path(tmp) / "busy.json"
        cmd = [sys.executable, __file__, "--busy-worker", str(result)]
        if bench.smoke:
            cmd.append("--smoke")
        subprocess.run(cmd, check=True, timeout=300, stdout=subprocess.DEVNULL)
        got = json.loads(result.read_text())
    window, hand = got["streaming"]["window"], got["hand"]
    print(
        f"fno_busy: {got['job_limit']} simulations; window {window['seconds']} s, "
        f"{window['steps']} steps ({window['steps_per_s']} steps/s; the hand loop "
        f"{hand['steps_per_s']}), {window['samples_put']} samples streamed in, reservoir "
        f"full at its start: {window['reservoir_full_at_start']}",
        file=sys.stderr,
    )
    if not window["samples_put"] and not bench.smoke:
        raise RuntimeError("no sample was streamed in during the window: not a steady state")
    rows = busy_rows(got, size_of(bench.smoke).grid)
    if not rows:
        print("no GPU utilisation meter: the FNO busy rows are left out", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gpu.py's FNO cases' worker processes")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--busy-worker", metavar="RESULT", help="the fno_busy case's worker")
    parser.add_argument(
        "--example-worker",
        metavar="RESULT",
        help="run the example with the flags after --, training for --seconds",
    )
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("flags", nargs="*", help="the example's flags (after --)")
    opts = parser.parse_args(argv)
    if opts.busy_worker:
        busy_worker(opts.busy_worker, opts.smoke)
    elif opts.example_worker:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        summary = run_example(opts.flags, 0.0, opts.seconds, 0.0, utilisation_meter(device))
        print(summary.pop("printed"), end="")
        Path(opts.example_worker).write_text(to_json(summary))
    else:
        parser.error("give --busy-worker or --example-worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
