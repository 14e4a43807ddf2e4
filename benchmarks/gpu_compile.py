"""Case (c) of `benchmarks/gpu.py`: the heat example's small MLP with `torch_compile`
and CUDA graphs against eager, in steps/s.

* ``compile``: OnlineTrainer with ``torch_compile_mode="reduce-overhead"`` (inductor's
  kernels and CUDA graphs) and Adam with ``fused=True``, against OnlineTrainer eager with
  Adam's default (``foreach`` on CUDA): what a user gets by setting the option and
  following the docs' optimizer advice. Target 3.0.
* ``compile_hand``: the same two configurations in a hand-written loop on a batch
  already on the device: how much of the gain is left when nothing but the step runs
  (the trainer's own host work per step is then the difference between the rows).

fp32 (no autocast), batch 64, output field 1,024. Each round builds its trainer (or
model) afresh; the first `warmup` steps (compilation, CUDA-graph recording) are not
timed, in ours and in the baseline alike. Under ``--smoke`` (CPU) ours compiles with
``aot_eager`` (seconds, no CUDA graphs) and keeps Adam's default, for the code path only;
under ``--cpu`` it compiles with inductor (no CUDA graphs off CUDA) and a fused Adam.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from typing import Any

import torch
from gpu_common import BATCH, Bench, make_model, make_samples, process_sample, reset_accelerate, row
from trainer_overhead import Prefilled, synchronize

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

FIELD = 1024


def compile_args(bench: Bench) -> dict[str, Any]:
    """Our TrainingArguments' compile options: CUDA graphs on a GPU; aot_eager under
    --smoke (CUDA graphs are refused off CUDA, inductor takes a minute on a CPU)."""
    if bench.smoke:
        return {"torch_compile_backend": "aot_eager"}
    if bench.device.type != "cuda":  # --cpu
        return {"torch_compile": True}
    return {"torch_compile_mode": "reduce-overhead"}


def make_optimizer(model: torch.nn.Module, fused: bool) -> torch.optim.Optimizer:
    """Adam; `fused`: one kernel for every parameter's update (CUDA; the CPU too in
    recent torch); else Adam's default (``foreach`` on CUDA, a loop on the CPU)."""
    return torch.optim.Adam(model.parameters(), lr=1e-4, fused=fused or None)


class WarmClock(Hook):
    """Times the steps after the first `warmup` ones, to LOOP_END (device synchronised)."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.start = 0.0
        self.seconds = 0.0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.warmup:
            synchronize(trainer.accelerator.device)
            self.start = time.perf_counter()

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        synchronize(trainer.accelerator.device)
        self.seconds = time.perf_counter() - self.start


def run_trainer(
    samples: list, field: int, steps: int, warmup: int, out: str, compiled: dict[str, Any] | None
) -> float:
    """Steps/s of OnlineTrainer after `warmup` steps; `compiled`: its compile options
    (and a fused Adam on CUDA), None: eager, Adam's default."""
    reset_accelerate()
    args = TrainingArguments(
        output_dir=out, batch_size=BATCH, buffer="reservoir", sample_to_insert_ratio=0,
        buffer_size=len(samples), watermark=BATCH, max_steps=warmup + steps,
        save_at_end=False, report_to="none", disable_progress_bar=True,
        **(compiled or {}),
    )  # fmt: skip
    model = make_model(field)
    fused = compiled is not None and not bench_smoke(compiled)
    clock = WarmClock(warmup)
    trainer = OnlineTrainer(
        model, args, make_optimizer(model, fused), train_source=Prefilled(samples),
        process_sample=process_sample, hooks=[clock],
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return steps / clock.seconds


def run_hand(
    device: torch.device, field: int, steps: int, warmup: int, compiled: dict[str, Any] | None
) -> float:
    """Steps/s of a hand loop on one batch already on `device`, after `warmup` steps."""
    model = make_model(field).to(device)
    optimizer = make_optimizer(model, compiled is not None and not bench_smoke(compiled))
    forward: Any = model
    graphs = compiled is not None and compiled.get("torch_compile_mode") == "reduce-overhead"
    if compiled is not None:
        backend = compiled.get("torch_compile_backend", "inductor")
        forward = torch.compile(model, backend=backend, mode=compiled.get("torch_compile_mode"))
    x = torch.randn(BATCH, 6, device=device)
    y = torch.randn(BATCH, field, device=device)
    start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            synchronize(device)
            start = time.perf_counter()
        if graphs:  # as the trainer's step does (`core.accelerated.make_train_step`)
            torch.compiler.cudagraph_mark_step_begin()
        loss = torch.nn.functional.mse_loss(forward(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    return steps / (time.perf_counter() - start)


def bench_smoke(compiled: dict[str, Any]) -> bool:
    """Whether these are --smoke's options (Adam's default then, as the baseline's)."""
    return compiled.get("torch_compile_backend") == "aot_eager"


def _ours(bench: Bench, name: str) -> str:
    """What ours runs, as the row names it (--smoke: the GPU's name)."""
    if bench.device.type == "cuda" or bench.smoke:
        return f"{name} + CUDA graphs + fused Adam"
    return f"{name} (inductor) + fused Adam"


def _warmup(bench: Bench) -> int:
    return 2 if bench.smoke else 30


def case_compile(bench: Bench) -> dict[str, Any]:
    field = bench.field.get("field", FIELD)
    samples = make_samples(4 * max(field, BATCH), field)
    ours, base = [], []
    with tempfile.TemporaryDirectory(prefix="mt-gpu-") as out:
        for _ in range(bench.rounds):
            ours.append(
                run_trainer(samples, field, bench.steps, _warmup(bench), out, compile_args(bench))
            )
            base.append(run_trainer(samples, field, bench.steps, _warmup(bench), out, None))
    return row(
        f"{_ours(bench, 'torch_compile')} vs eager (trainer)",
        statistics.median(ours),
        statistics.median(base),
        "steps/s",
        3.0,
    )


def case_compile_hand(bench: Bench) -> dict[str, Any]:
    field = bench.field.get("field", FIELD)
    ours, base = [], []
    for _ in range(bench.rounds):
        ours.append(run_hand(bench.device, field, bench.steps, _warmup(bench), compile_args(bench)))
        base.append(run_hand(bench.device, field, bench.steps, _warmup(bench), None))
    return row(
        f"{_ours(bench, 'torch.compile')} vs eager (hand loop)",
        statistics.median(ours),
        statistics.median(base),
        "steps/s",
        3.0,
    )
