"""The checks of `TrainingArguments` that depend on the machine: whether the device the
run trains on can run what the arguments ask (fp16 autocast, CUDA graphs).

`device_problems` is the one implementation, called twice:

* by `core.accelerated.make_train_step` with the device of the run's `Accelerator`
  (`OnlineTrainer(...)` raises a `ConfigError`): arguments built in Python are checked
  there, as in Hugging Face's `Trainer` (made on one machine, they may run on another);
* by `config.parser.ArgumentParser`, at parse time, with the device the trainer's
  Accelerator will choose (`planned_device_type`): a usage error (exit status 2,
  ``argument --mixed_precision: ...``) before a model is built, a simulation launched
  or the output directory locked, like any other bad flag.

The prediction forms no process group and touches no GPU memory: under ``accelerate
launch`` every rank checks its own node alone, and says it (no collective, so no rank
waits on another that exited). torch and accelerate are imported only when a
machine-dependent option is asked for (this layer is torch-free to import).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from melissa_trainer.config.compile_options import CUDA_GRAPH_BACKEND, CompileOptions

__all__ = ["device_problems", "needs_device", "planned_device_type"]


def needs_device(mixed_precision: str, compile: CompileOptions | None) -> bool:
    """Whether `device_problems` depends on the device for these options (fp16, or CUDA
    graphs); when False it finds no problem on any device."""
    return mixed_precision == "fp16" or (compile is not None and compile.cuda_graphs)


def device_problems(
    mixed_precision: str,
    compile: CompileOptions | None,
    device_type: str | Callable[[], str],
) -> list[str]:
    """The problems of running `mixed_precision` and `compile`
    (`TrainingArguments.compile_options()`) on a device of type `device_type` (``"cpu"``,
    ``"cuda"``...; a callable is called only when the options depend on the device), one
    line each naming the field and the fix; [] when there is none.

    * fp16 off an accelerator: Accelerate runs no fp16 autocast on a CPU, and the run
      would train in float32 without a word;
    * CUDA graphs (``torch_compile_mode`` ``reduce-overhead`` / ``max-autotune``, or
      ``torch_compile_backend='cudagraphs'``) off CUDA, where they would do nothing.
    """
    if not needs_device(mixed_precision, compile):
        return []
    device = device_type() if callable(device_type) else device_type
    problems = []
    if mixed_precision == "fp16" and device == "cpu":
        problems.append(
            "mixed_precision='fp16' on cpu: Accelerate runs no fp16 autocast on a CPU, and "
            "the run would train in float32 without saying so: set mixed_precision='bf16' "
            "(its autocast runs on a CPU too) or 'no', or train on a GPU"
        )
    if compile is not None and compile.cuda_graphs and device != "cuda":
        field = (
            f"torch_compile_backend={compile.backend!r}"
            if compile.backend == CUDA_GRAPH_BACKEND
            else f"torch_compile_mode={compile.mode!r}"
        )
        if compile.mode == "max-autotune":
            instead = "set torch_compile_mode='max-autotune-no-cudagraphs' (the same search)"
        else:
            instead = (
                "leave torch_compile_mode unset (or 'default') with "
                "torch_compile_backend='inductor'"
            )
        problems.append(
            f"{field} captures CUDA graphs, but this run trains on {device}: {instead} "
            "to compile without CUDA graphs, or train on a CUDA device"
        )
    return problems


def planned_device_type() -> str:
    """The type of the device `trainer.setup.make_accelerator` will train on in this
    process, found without making an `Accelerator` (which, under a launch, would form
    the process group): ``"cpu"`` when Accelerate is told to use the CPU
    (ACCELERATE_USE_CPU) or for a multi-process launch on a node without a visible GPU
    (`core.accelerated.cpu_only_launch`), else Accelerate's own choice
    (`PartialState.default_device`: MPS, CUDA, other accelerators, else the CPU)."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    if parse_flag_from_env("ACCELERATE_USE_CPU"):
        return "cpu"
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        return "cpu"
    # `default_device` reads the machine only (no state of the instance); an instance
    # would set Accelerate's shared state up, and under a launch form the process group.
    # Should a later Accelerate read its instance there, the parse must not fail for it:
    # the common devices, then (the trainer's own check, on its real device, still runs).
    try:
        device: torch.device = PartialState.default_device.fget(None)
    except Exception:  # noqa: BLE001 - a prediction only (comment above)
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    return device.type
