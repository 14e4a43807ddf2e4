"""The checks of `TrainingArguments` that depend on the machine: whether the device the
run trains on can run what the arguments ask (fp16 autocast, CUDA graphs), and the
mixed precision the launch asks for (`resolve_mixed_precision`).

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
from typing import Any

from melissa_trainer.config.compile_options import CUDA_GRAPH_BACKEND, CompileOptions

__all__ = [
    "LAUNCH_PRECISION_ENV",
    "device_problems",
    "launch_precision",
    "needs_device",
    "planned_device_type",
    "resolve_mixed_precision",
]

#: what ``accelerate launch --mixed_precision`` (or its ``accelerate config`` file's
#: ``mixed_precision``) exports to the ranks, and Accelerate reads
LAUNCH_PRECISION_ENV = "ACCELERATE_MIXED_PRECISION"
#: the values `TrainingArguments.mixed_precision` takes (`argument_checks` checks them)
_PRECISIONS = ("no", "fp16", "bf16")


def launch_precision() -> str | None:
    """The mixed precision the launch asks for: `LAUNCH_PRECISION_ENV` stripped and in
    lower case; None when it is unset or empty (a plain ``python train.py``)."""
    value = os.environ.get(LAUNCH_PRECISION_ENV, "").strip().lower()
    return value or None


def resolve_mixed_precision(given: Any) -> tuple[Any, str | None, str | None]:
    """What `TrainingArguments.mixed_precision` becomes, from the script's `given`
    value (None: unset) and the launch's (`launch_precision`): ``(value, problem,
    warning)``.

    * unset: the launch's value (``accelerate launch --mixed_precision bf16`` trains in
      bf16, as with Hugging Face's `Trainer`), else ``"no"``; a launch's value this
      trainer does not run (``fp8``) is a problem naming it, the value then ``"no"``;
    * given: the script's value wins; a launch asking for fp16 or bf16 and another
      value given is said in `warning`, naming both. A launch's ``"no"`` conflicts
      with nothing: ``accelerate launch`` exports ``no`` when it is not told a
      precision, so it cannot be told from a ``no`` asked for.

    `given` is returned as given (`argument_values` normalises it, a YAML ``no`` read
    as False included). Reads the environment only."""
    launch = launch_precision()
    if given is None:
        if launch is None:
            return "no", None, None
        if launch not in _PRECISIONS:
            return "no", (
                f"mixed_precision is unset and the launch asks for {launch!r} "
                f"({LAUNCH_PRECISION_ENV}, from accelerate launch --mixed_precision or its "
                "accelerate config file), which this trainer does not run: launch with "
                "--mixed_precision no, fp16 or bf16, or set the script's mixed_precision"
            ), None  # fmt: skip
        return launch, None, None
    mine = "no" if given is False else given.strip().lower() if isinstance(given, str) else None
    if launch in ("fp16", "bf16") and mine in _PRECISIONS and mine != launch:
        return given, None, (
            f"the launch asks for mixed precision {launch!r} ({LAUNCH_PRECISION_ENV}, from "
            f"accelerate launch --mixed_precision or its accelerate config file) but the "
            f"script's mixed_precision is {mine!r}: the script's {mine!r} is used. Leave "
            f"the script's mixed_precision unset to use the launch's, or launch with "
            f"--mixed_precision {mine}"
        )  # fmt: skip
    return given, None, None


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
        launched = launch_precision() == "fp16"
        asked = (
            f" (the launch's: {LAUNCH_PRECISION_ENV}='fp16', from accelerate launch "
            "--mixed_precision or its accelerate config file)"
            if launched
            else ""
        )
        where = " (in the script, or the launch's --mixed_precision)" if launched else ""
        problems.append(
            f"mixed_precision='fp16'{asked} on cpu: Accelerate runs no fp16 autocast on a "
            "CPU, and the run would train in float32 without saying so: set "
            f"mixed_precision='bf16' or 'no'{where} (bf16's autocast runs on a CPU too), "
            "or train on a GPU"
        )
    if compile is not None and compile.cuda_graphs and device != "cuda":
        field = (
            f"torch_compile_backend={compile.backend!r}"
            if compile.backend == CUDA_GRAPH_BACKEND
            else f"torch_compile_mode={compile.mode!r}"
        )
        if compile.mode == "max-autotune":  # (its kernel search runs on a CPU too)
            problems.append(
                f"{field} is inductor's kernel search plus CUDA graphs, which only a CUDA "
                f"device runs, and this run trains on {device}: set torch_compile_mode="
                "'max-autotune-no-cudagraphs' for the same kernel search without CUDA "
                "graphs, or train on a CUDA device"
            )
        else:
            problems.append(
                f"{field} captures CUDA graphs, but this run trains on {device}: leave "
                "torch_compile_mode unset (or 'default') with torch_compile_backend="
                "'inductor' to compile without CUDA graphs, or train on a CUDA device"
            )
    return problems


def planned_device_type() -> str:
    """The type of the device `trainer.setup.make_accelerator` will train on in this
    process, found without making an `Accelerator` (which, under a launch, would form
    the process group): ``"cpu"`` when Accelerate is told to use the CPU
    (ACCELERATE_USE_CPU) or for a multi-process launch on a node without a visible GPU
    (`core.cpu_launch.cpu_only_launch`), else Accelerate's own choice
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
