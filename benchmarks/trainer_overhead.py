"""What the framework adds to a training step: OnlineTrainer versus a hand-written loop.

Workload: an MLP 3 -> 256 -> 256 -> 1024, batch 64, Adam, one torch thread, samples
drawn from a pre-filled buffer of 4096 samples. The baseline draws `batch_size` random
samples per step from a plain list, applies the same `process_sample`, stacks them and
runs the same forward / backward / step. OnlineTrainer runs with its default hooks
(progress bar and TensorBoard on). The two alternate (A B A B ...) and the medians of
the step rates are compared; target: ours >= 0.97x the plain loop. Both run on the
device Accelerate picks (CUDA when there is a GPU, the case then says so), the baseline
copying each batch there as the trainer does; on a GPU both clocks stop only once the
device is done. The workload is `trainer_overhead_workload.py`'s.

The row "per-simulation losses" times the same OnlineTrainer with its per-simulation
loss tracking on (`simulation_loss_steps=20`: the per-sample losses kept on the device,
reduced every 20 steps; what an adaptive study turns on) against off, on samples that
carry a `simulation_id` (256 simulations of 16 samples), interleaved; target: tracking
costs at most 3% of a step (ratio >= 0.97).

The row "heat workload" times `online_vs_offline.py`'s training alone (`trainer_overhead_heat`):
OnlineTrainer as that benchmark builds it (reservoir, vectorized `process_batch`, the
heat MLP, batch 32) against offline's loop on the same samples' features already in
memory, in steps per CPU-second of the process (steadier than wall time on a busy
machine), interleaved; no target: the trainer also computes each batch's features
from its raw samples, which offline did once, before its loop (`--no-heat` skips it).

`--step-paths` also times the trainer's two step functions against each other
(`melissa_trainer.core.accelerated`: `PlainStep`, the fast path this configuration picks,
and `AcceleratedStep`), `backward` + `update` on one batch, in rounds of 100 steps
interleaved, on this model and on a tiny one (3 -> 16 -> 16) where the framework's
cost weighs most; in CPU time of the process, which other processes on a loaded
machine disturb less than wall time. The fast path is kept only while it is faster
(target: >= 1.0x).

With 2 processes (launched with `accelerate launch --multi_gpu --num_processes 2`), the
baseline is a plain DistributedDataParallel loop in the same process group: gloo on CPU
on a machine with fewer than 2 GPUs, else NCCL with one GPU per process.

    python benchmarks/trainer_overhead.py            # 1 and 2 processes, ~2 minutes
    python benchmarks/trainer_overhead.py --quick    # a few seconds per case
    python benchmarks/trainer_overhead.py --json     # {"rows": [...]}
    python benchmarks/trainer_overhead.py --quick --no-ddp --step-paths
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from report import add_flags, print_json
from trainer_overhead_heat import measure_heat

# the workload, its own module (re-exported: other benchmarks import it from here)
from trainer_overhead_workload import (  # noqa: F401
    BATCH,
    N_SAMPLES,
    Clock,
    Prefilled,
    make_model,
    make_samples,
    process_sample,
    synchronize,
    training_device,
)

from melissa_trainer import OnlineTrainer, TrainingArguments

TARGET = 0.97


def run_ours(samples: list, steps: int, out: str, seed: int, loss_steps: int = 0) -> float:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # no rate limit: what this measured before issue 30's defaults
        buffer_size=N_SAMPLES,
        watermark=BATCH,
        max_steps=steps,
        save_at_end=False,
        seed=seed,
        simulation_loss_steps=loss_steps,
    )
    model = make_model(seed)
    clock = Clock()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-4),
        train_source=Prefilled(samples),
        process_sample=process_sample,
        hooks=[clock],
    )
    with contextlib.redirect_stdout(io.StringIO()):  # keep the log lines out of the table
        trainer.train()
    return steps / clock.seconds


def run_plain(samples: list, steps: int, seed: int, ddp: bool, device: torch.device) -> float:
    model: torch.nn.Module = make_model(seed).to(device)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rng = random.Random(seed)
    loss_fn = torch.nn.functional.mse_loss
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        examples = [process_sample(s) for s in rng.choices(samples, k=BATCH)]
        x = torch.stack([e[0] for e in examples]).to(device, non_blocking=True)
        y = torch.stack([e[1] for e in examples]).to(device, non_blocking=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    return steps / (time.perf_counter() - start)


def measure(rounds: int, steps: int, ddp: bool) -> tuple[float, float]:
    """Medians (ours, baseline) in steps/s over `rounds` interleaved rounds."""
    rank = int(os.environ.get("RANK", "0"))
    samples = make_samples(N_SAMPLES, seed=rank)
    device = training_device()
    out = tempfile.mkdtemp(prefix="mt-overhead-")
    ours, base = [], []
    try:
        run_plain(samples, max(steps // 10, 20), 0, ddp, device)  # warm-up
        for r in range(rounds):
            ours.append(run_ours(samples, steps, out, seed=r))
            base.append(run_plain(samples, steps, seed=r, ddp=ddp, device=device))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return statistics.median(ours), statistics.median(base)


def measure_simulation_losses(rounds: int, steps: int) -> tuple[float, float]:
    """Medians (tracked, not tracked) of OnlineTrainer's steps/s, interleaved."""
    samples = make_samples(N_SAMPLES, seed=0, with_ids=True)
    out = tempfile.mkdtemp(prefix="mt-overhead-")
    tracked, plain = [], []
    try:
        run_ours(samples, max(steps // 10, 20), out, seed=0)  # warm-up
        for r in range(rounds):
            tracked.append(run_ours(samples, steps, out, seed=r, loss_steps=20))
            plain.append(run_ours(samples, steps, out, seed=r, loss_steps=0))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return statistics.median(tracked), statistics.median(plain)


def measure_step_paths(rounds: int, width: int | None) -> tuple[float, float]:
    """Medians (PlainStep, AcceleratedStep) in steps per CPU-second, on the benchmark's
    model (`width` None) or a 3 -> width -> width MLP, one batch of `BATCH`."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    from melissa_trainer.core.accelerated import AcceleratedStep, PlainStep, make_train_step

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    acc = Accelerator(cpu=True)
    torch.manual_seed(0)
    if width is None:
        model, out = make_model(), 1024
    else:
        layers = [torch.nn.Linear(3, width), torch.nn.ReLU(), torch.nn.Linear(width, width)]
        model, out = torch.nn.Sequential(*layers), width
    model, optimizer = acc.prepare(model, torch.optim.Adam(model.parameters(), lr=1e-4))

    def loss(m: torch.nn.Module, b: Any) -> torch.Tensor:
        return torch.nn.functional.mse_loss(m(b[0]), b[1])

    plain = make_train_step(acc, model, optimizer, None, loss)
    assert isinstance(plain, PlainStep)
    paths = {"plain": plain, "accelerate": AcceleratedStep(acc, model, optimizer, None, loss)}
    batch = (torch.randn(BATCH, 3), torch.randn(BATCH, out))
    rates: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, step in paths.items():
            start = time.process_time()
            for _ in range(100):
                step.backward(batch)
                step.update()
            rates[name].append(100 / (time.process_time() - start))
    return statistics.median(rates["plain"]), statistics.median(rates["accelerate"])


def row(case: str, ours: float, base: float, target: float | None = TARGET) -> dict[str, Any]:
    return {
        "case": case,
        "ours": round(ours, 1),
        "baseline": round(base, 1),
        "unit": "steps/s",
        "ratio": round(ours / base, 3),
        "target": target,
    }


def worker(rounds: int, steps: int, result: str) -> None:
    """One rank of the 2-process case (under accelerate launch)."""
    from accelerate import PartialState

    torch.set_num_threads(1)
    state = PartialState(cpu=not torch.cuda.is_available())  # gloo on CPU, else NCCL
    ours, base = measure(rounds, steps, ddp=True)
    if state.is_main_process:
        case = f"2 processes ({state.backend}) vs plain DDP"
        Path(result).write_text(json.dumps(row(case, ours, base)))


def two_processes(rounds: int, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
        s.close()
        result = str(Path(tmp) / "row.json")
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [
            accelerate or "accelerate",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            port,
            __file__,
            "--worker",
            result,
            "--rounds",
            str(rounds),
            "--steps",
            str(steps),
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if torch.cuda.device_count() < 2:  # NCCL cannot put both ranks on one GPU
            env["CUDA_VISIBLE_DEVICES"] = ""
        subprocess.run(
            cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return json.loads(Path(result).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--no-ddp", action="store_true", help="skip the 2-process case")
    parser.add_argument(
        "--no-heat", action="store_true", help="skip the heat workload (online_vs_offline's)"
    )
    parser.add_argument(
        "--step-paths", action="store_true", help="also: plain step vs Accelerate's step"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 7)
    steps = opts.steps or (200 if opts.quick else 1500)
    if opts.worker:
        worker(rounds, steps, opts.worker)
        return
    torch.set_num_threads(1)
    os.environ.setdefault("TQDM_DISABLE", "0")
    ours, base = measure(rounds, steps, ddp=False)
    device = training_device().type
    case = "1 process vs hand-written loop" + ("" if device == "cpu" else f" ({device})")
    rows = [row(case, ours, base)]
    tracked, untracked = measure_simulation_losses(rounds, steps)
    rows.append(row("per-simulation losses on vs off", tracked, untracked))
    if not opts.no_heat:
        heat = row("heat workload (online_vs_offline's) vs offline's loop, per CPU-s",
                   *measure_heat(rounds, steps), None)  # fmt: skip
        heat["unit"] = "steps/CPU-s"
        rows.append(heat)
    if opts.step_paths:
        for width, name in ((None, "this MLP"), (16, "MLP 3-16-16")):
            plain, accelerate = measure_step_paths(10 * rounds, width)
            rows.append(row(f"PlainStep vs AcceleratedStep, {name}", plain, accelerate, 1.0))
    if not opts.no_ddp:
        rows.append(two_processes(rounds, steps))
    if opts.json:
        print_json(rows)
        return
    print(
        f"\nMLP 3-256-256-1024, batch {BATCH}, Adam, 1 thread; medians of {rounds} "
        f"interleaved rounds of {steps} steps"
    )
    print(f"{'case':<44} {'ours':>10} {'baseline':>10} {'ratio':>7} {'target':>7}")
    for r in rows:
        print(
            f"{r['case']:<44} {r['ours']:>10.1f} {r['baseline']:>10.1f} "
            f"{r['ratio']:>7.3f} {str(r['target'] or '-'):>7}"
        )


if __name__ == "__main__":
    main()
