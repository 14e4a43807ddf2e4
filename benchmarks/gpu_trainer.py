"""The cases of `benchmarks/gpu.py` that time the trainer's own data path on the
device, each against its baseline in the same run: OnlineTrainer against a hand-written
bf16 loop (case ``hand``), batch staging against a plain ``send_to_device``
(``staging``), the device-resident buffer against the host one (``device_buffer``), and
the stop flag's pipelined all-reduce against none (``stop_flag``); `gpu.py`'s
docstring says what each row is. `device_loop` is training steps on a batch already on
the device, the baseline of the busy rows too.
"""

from __future__ import annotations

import contextlib
import io
import random
import statistics
import tempfile
import time
from typing import Any

import torch
from gpu_common import (
    BATCH,
    SYNC_WINDOW,
    as_batch,
    make_model,
    make_samples,
    process_sample,
    reset_accelerate,
    row,
)
from trainer_overhead import Clock, Prefilled, synchronize

from melissa_trainer import OnlineTrainer, TrainingArguments


def run_trainer(
    samples: list,
    field: int,
    steps: int,
    out: str,
    seed: int,
    precision: str,
    stage: bool,
    buffer_device: str | None = None,
) -> float:
    """OnlineTrainer's steps/s from TRAIN_START to LOOP_END (device synchronised);
    `buffer_device` given: batches made from blocks (`as_batch`), the buffer there."""
    reset_accelerate()
    args = TrainingArguments(
        output_dir=out,
        batch_size=BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # draws as fast as training runs
        buffer_size=len(samples),
        watermark=BATCH,
        max_steps=steps,
        save_at_end=False,
        seed=seed,
        mixed_precision=precision,
        stage_batches=stage,
        buffer_device=buffer_device or "host",
        report_to="none",
        disable_progress_bar=True,
    )
    model = make_model(field, seed)
    clock = Clock()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-4),
        train_source=Prefilled(samples),
        hooks=[clock],
        **(
            {"process_batch": as_batch}
            if buffer_device is not None
            else {"process_sample": process_sample}
        ),
    )
    with contextlib.redirect_stdout(io.StringIO()):  # log lines stay out of the table
        trainer.train()
    return steps / clock.seconds


def run_hand_loop(samples: list, field: int, steps: int, seed: int, device: torch.device) -> float:
    """The hand-written loop: same draws' cost, processing, bf16 autocast, Adam."""
    model = make_model(field, seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rng = random.Random(seed)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        examples = [process_sample(s) for s in rng.choices(samples, k=BATCH)]
        x = torch.stack([e[0] for e in examples]).to(device, non_blocking=True)
        y = torch.stack([e[1] for e in examples]).to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    return steps / (time.perf_counter() - start)


def case_trainer_vs_hand(
    device: torch.device, rounds: int, steps: int, field: int = 1024
) -> dict[str, Any]:
    samples = make_samples(4 * field, field)
    ours, base = [], []
    with tempfile.TemporaryDirectory(prefix="mt-gpu-") as out:
        run_hand_loop(samples, field, max(steps // 5, 5), 0, device)  # warm-up
        run_trainer(samples, field, max(steps // 5, 5), out, 0, "bf16", True)
        for r in range(rounds):
            ours.append(run_trainer(samples, field, steps, out, r, "bf16", True))
            base.append(run_hand_loop(samples, field, steps, r, device))
    return row(
        "trainer vs hand-written CUDA loop (bf16)",
        statistics.median(ours),
        statistics.median(base),
        "steps/s",
        0.97,
    )


def case_staging(rounds: int, steps: int, field: int = 128 * 128) -> dict[str, Any]:
    # 64 KB samples by default: a batch is 4 MB to copy
    samples = make_samples(1024, field)
    staged, plain = [], []
    with tempfile.TemporaryDirectory(prefix="mt-gpu-") as out:
        run_trainer(samples, field, max(steps // 5, 5), out, 0, "bf16", True)  # warm-up
        for r in range(rounds):
            staged.append(run_trainer(samples, field, steps, out, r, "bf16", True))
            plain.append(run_trainer(samples, field, steps, out, r, "bf16", False))
    return row(
        "staging+prefetch vs plain send_to_device",
        statistics.median(staged),
        statistics.median(plain),
        "steps/s",
        1.11,
    )


def case_device_buffer(rounds: int, steps: int, field: int = 256) -> dict[str, Any]:
    # 1 KB samples by default (256 float32)
    samples = make_samples(4096, field)
    on_device, on_host = [], []
    with tempfile.TemporaryDirectory(prefix="mt-gpu-") as out:
        for where in ("accelerator", "host"):  # warm-up
            run_trainer(samples, field, max(steps // 5, 5), out, 0, "bf16", True, where)
        for r in range(rounds):
            for where, rates in (("accelerator", on_device), ("host", on_host)):
                rates.append(run_trainer(samples, field, steps, out, r, "bf16", True, where))
    return row(
        "device-resident buffer vs host buffer (1 KB samples)",
        statistics.median(on_device),
        statistics.median(on_host),
        "steps/s",
        1.25,
    )


def device_loop(
    model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor], steps: int, sync: Any
) -> float:
    """Steps/s of bf16 training steps on `batch`; `sync`: a StopSync agreed every
    `SYNC_WINDOW` steps as the trainer does under several ranks (the agreement started
    at a window's start and read after its steps, one window late), or None."""
    device = batch[0].device
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    synchronize(device)
    start = time.perf_counter()
    for i in range(steps):
        if sync is not None and i % SYNC_WINDOW == 0:
            if sync.started:
                sync.result()  # the previous window's agreement
            sync.start(False, SYNC_WINDOW)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if sync is not None and sync.started:
        sync.result()
    synchronize(device)
    return steps / (time.perf_counter() - start)


def case_stop_flag(
    device: torch.device, rounds: int, steps: int, field: int = 1024
) -> dict[str, Any]:
    import torch.distributed as dist

    from melissa_trainer.core.stop_sync import StopSync

    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        sync = StopSync(device, num_processes=2)  # "distributed": the group exists
        assert sync.distributed
        model = make_model(field).to(device)
        batch = (torch.randn(BATCH, 6, device=device), torch.randn(BATCH, field, device=device))
        device_loop(model, batch, max(steps // 5, SYNC_WINDOW), sync)  # warm-up
        with_flag, without = [], []
        for _ in range(rounds):
            with_flag.append(device_loop(model, batch, steps, sync))
            without.append(device_loop(model, batch, steps, None))
    finally:
        dist.destroy_process_group()
    return row(
        f"stop flag all-reduce every {SYNC_WINDOW} steps vs none ({backend})",
        statistics.median(with_flag),
        statistics.median(without),
        "steps/s",
        0.99,
    )
