"""`torch.compile`, and CUDA graphs through it, for the training step.

`TrainingArguments` names the options as Hugging Face `transformers` does
(`torch_compile`, `torch_compile_backend`, `torch_compile_mode`); `config.compile_options`
checks them and this module compiles the model the step runs. The choices it makes, and why:

* **What is compiled: the prepared model, after `Accelerator.prepare`, for the training
  step only** (`compile_model`, called by `accelerated.make_train_step`). Compiling the
  DDP-wrapped module is what PyTorch's DDP + dynamo integration expects (its
  DDPOptimizer splits the graph at the gradient buckets, so the all-reduces still
  overlap the backward) and what Accelerate's own ``dynamo_plugin`` does. That plugin is
  not used: it would make ``trainer.model`` the compiled wrapper, whose ``state_dict``
  names every weight ``_orig_mod.*``, so a checkpoint saved with compilation would not
  load without it (Accelerate's `save_state` saves the prepared model's own keys), and
  validation, hooks and ``unwrap_model`` would all run or see the wrapper. Here
  ``trainer.model`` stays the eager prepared module: checkpoints hold the same keys with
  or without compilation and load either way (tests/trainer/test_compile.py), and the
  compiled wrapper shares its parameters, so the optimizer, the grad scaler and a
  resume see one set of weights.
* **Validation runs eager** (`trainer.reporting.evaluate` calls ``trainer.model``): it runs under
  ``no_grad`` in eval mode on another batch size, each a recompilation, for a few
  batches every `eval_steps`.
* **CUDA graphs come through** ``torch_compile_mode="reduce-overhead"`` (inductor's
  CUDA-graph trees; ``"max-autotune"`` uses them too), or the ``"cudagraphs"`` backend
  (CUDA graphs without inductor's kernels). No separate option: torch's CUDA-graph trees
  already re-record a graph per input shape, keep one memory pool, and skip graphs
  where an operation cannot be captured, which a hand-captured whole step would have to
  redo, and they leave the loop as it is (hooks see each step's loss; mixed precision
  and DDP unchanged). They are refused off CUDA (`config.device_checks`), where they would do
  nothing, and with gradient accumulation (`accumulation_problem`).
* **Shapes**: ``dynamic`` is left to torch (None): the first batch size compiles a
  static graph; a second one (the last batch of a stream may be smaller) recompiles
  once with a dynamic batch dimension, which then serves every size but 1 (torch
  specialises a dimension of size 1: one more compilation). Under ``reduce-overhead``
  each new size also records a CUDA graph.

Numerics: inductor generates its own kernels (vectorised transcendental functions,
fused and reordered pointwise arithmetic), so a compiled run is not bitwise the eager
one: on the tests' MLP the weights differ by a few float32 ulps after some steps
(tests/trainer/test_compile.py states the tolerance). ``"aot_eager"`` runs the same
ATen kernels and gives the eager run's weights bitwise.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch

from melissa_trainer.config.compile_options import CompileOptions

logger = logging.getLogger(__name__)


def compile_model(model: torch.nn.Module, options: CompileOptions) -> torch.nn.Module:
    """`torch.compile(model)` with `options`: a wrapper sharing `model`'s parameters and
    buffers (`model` itself is left eager). Compilation happens at the first call, not
    here. Raises ValueError when `model` is already compiled (compiled twice)."""
    if _is_compiled(model):
        raise ValueError(
            "the model is already compiled (torch.compile) and torch_compile=True asks "
            "to compile it again: pass the eager model, which the trainer compiles and "
            "checkpoints under its own weight names"
        )
    kwargs: dict[str, Any] = {"backend": options.backend}
    if options.mode is not None:
        kwargs["mode"] = options.mode
    logger.info("training step compiled with torch.compile(%s) at its first call", kwargs)
    return torch.compile(model, **kwargs)  # type: ignore[return-value]


def warn_if_compiled(model: torch.nn.Module) -> None:
    """Log a warning when the user compiled `model` before giving it to the trainer:
    its checkpoints then name weights ``_orig_mod.*`` (``module._orig_mod.*`` under
    DDP), which a run of the eager model cannot load; `torch_compile` avoids that."""
    if _is_compiled(model):
        logger.warning(
            "the model given to OnlineTrainer is already compiled (torch.compile): its "
            "checkpoints name its weights '_orig_mod.*' and load only into a compiled "
            "model; give the eager model and set torch_compile=True instead"
        )


def _is_compiled(model: torch.nn.Module) -> bool:
    """Whether `model`, or the module a DDP wrapper holds, is torch.compile's wrapper."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:  # not imported: nothing was compiled in this process
        return False
    inner = getattr(model, "module", model)  # DDP's
    return any(isinstance(m, eval_frame.OptimizedModule) for m in (model, inner))
