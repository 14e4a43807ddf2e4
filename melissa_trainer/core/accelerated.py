"""The trainer's use of Accelerate: the training step's arithmetic, chosen once at
construction (how the process group is formed: `cpu_launch`).

`make_train_step` returns one of two `TrainStep`s behind one API (`backward` per
micro-batch, `update` per optimizer step):

* `PlainStep`, where Accelerate's wrappers add nothing but cost: no grad scaler (no
  mixed precision, or bf16, which needs none), and one process or plain DDP, without
  gradient accumulation under DDP (which needs Accelerate's `no_sync`): Accelerate's
  `accumulate`, `autocast` and `backward` cost a small model's step measurably
  (docs/measured.md, "Design choices, measured"). On a GPU `Accelerator.backward`
  also divides the loss by the accumulation steps even when they are 1: two more
  kernels a step (the division and its gradient), which a small model's CPU-bound
  step pays in full. Under bf16,
  `PlainStep` runs the loss under the same `Accelerator.autocast()` context.
* `AcceleratedStep` otherwise: Accelerate's `accumulate`, `autocast` and `backward`
  (loss scaling, `no_sync` between micro-batches), and its optimizer wrapper when it
  does something (a grad scaler, or a backend other than DDP): without a scaler, under
  DDP or one process, the wrapper only forwards `step()` after probing installed
  packages at every step, so the optimizer it wraps is stepped directly.

Both do the same arithmetic (the loss divided by `gradient_accumulation_steps` before
backward, as `Accelerator.backward` does), so they give bitwise-identical weights;
tests/trainer/test_trainer.py checks it.

With `TrainingArguments.torch_compile`, either step runs its loss on the prepared model
compiled (`compiled.compile_model`; the `forward` below), while Accelerate's
`accumulate` (DDP's ``no_sync``) and everything outside the step (checkpoints,
validation, hooks) keep the eager prepared model: see `melissa_trainer.core.compiled`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType

from melissa_trainer.config.compile_options import CompileOptions
from melissa_trainer.config.device_checks import device_problems
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.core.compiled import compile_model, warn_if_compiled
from melissa_trainer.core.grad_norms import GradNorms
from melissa_trainer.core.schedule_length import SchedulerStepError
from melissa_trainer.core.unused_parameters import unused_parameters_named

# Where Accelerate's optimizer wrapper adds nothing to `step()` when there is no scaler.
_PLAIN_OPTIMIZER_STEP = {DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU}

#: `compute_loss(model, batch)`: the loss tensor of one micro-batch
ComputeLoss = Callable[[torch.nn.Module, Any], torch.Tensor]


class TrainStep(Protocol):
    """The arithmetic of one optimizer step; the trainer calls `backward` once per
    micro-batch, then `update` once. Not thread-safe: the training thread only."""

    #: the loss of one micro-batch; the trainer may swap it between runs (`train()`)
    compute_loss: ComputeLoss
    #: the norms `update` clipped, with ``max_grad_norm`` (None: no clipping)
    grad_norms: GradNorms | None

    def backward(self, batch: Any) -> torch.Tensor:
        """Forward, loss and backward of one micro-batch; returns the loss, detached
        and not divided by the accumulation steps (what hooks and logs see)."""
        ...

    def update(self) -> None:
        """Gradients clipped to ``max_grad_norm`` (their norm added to `grad_norms`)
        when it is set, optimizer step, scheduler step (not when a grad scaler skipped
        the optimizer step), gradients zeroed (set to None)."""
        ...


class PlainStep:
    """Plain PyTorch calls on the model Accelerate prepared (or that model compiled) and
    the optimizer it wraps."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        lr_scheduler: Any | None,
        compute_loss: ComputeLoss,
        gradient_accumulation_steps: int = 1,
        autocast: Callable[[], AbstractContextManager[Any]] | None = None,
        step_begin: Callable[[], None] | None = None,
        max_grad_norm: float | None = None,
        set_sync: Callable[[bool], None] | None = None,
    ) -> None:
        self.model = model
        self.max_grad_norm = max_grad_norm
        #: the parameters clipped (those of `model`, compiled or not: the same tensors)
        self._params = list(model.parameters()) if max_grad_norm is not None else []
        self.grad_norms = _norms(model, max_grad_norm)
        #: called before each forward: a new CUDA-graph generation (`compiled`), or None
        self.step_begin = step_begin
        self.optimizer = optimizer  # the unwrapped one
        self.lr_scheduler = lr_scheduler
        self.compute_loss = compute_loss
        self.accumulation = gradient_accumulation_steps
        #: a new mixed-precision context per micro-batch (`Accelerator.autocast`), or None
        self.autocast = autocast
        #: sets `Accelerator.sync_gradients` (True on a step's last micro-batch alone), as
        #: Accelerate's `accumulate` does in `AcceleratedStep`, so that a hook reading it
        #: (Accelerate's idiom for "the gradients are complete") reads the same on one
        #: process as under DDP (htrial11: it was True on every micro-batch here); None
        #: without accumulation, where it stays True
        self.set_sync = set_sync if gradient_accumulation_steps > 1 else None
        self._micro = 0  #: micro-batches of this step done so far

    def backward(self, batch: Any) -> torch.Tensor:
        if self.step_begin is not None:
            self.step_begin()
        if self.set_sync is not None:  # (before the forward, as Accelerate's `accumulate`)
            self._micro += 1
            self.set_sync(self._micro >= self.accumulation)
        with unused_parameters_named():
            if self.autocast is None:
                loss = self.compute_loss(self.model, batch)
            else:
                with self.autocast():
                    loss = self.compute_loss(self.model, batch)
        (loss / self.accumulation if self.accumulation > 1 else loss).backward()
        return loss.detach()

    def update(self) -> None:
        clip, norms = self.max_grad_norm, self.grad_norms
        if clip is not None and norms is not None:  # (no host read: the norm stays on device)
            norms.add(torch.nn.utils.clip_grad_norm_(self._params, clip))
        self._micro = 0
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.lr_scheduler is not None:
            step_scheduler(self.lr_scheduler)


class AcceleratedStep:
    """Accelerate's accumulation, mixed precision and loss scaling."""

    def __init__(
        self,
        accelerator: Accelerator,
        model: torch.nn.Module,
        optimizer: Any,
        lr_scheduler: Any | None,
        compute_loss: ComputeLoss,
        forward: torch.nn.Module | None = None,
        step_begin: Callable[[], None] | None = None,
        max_grad_norm: float | None = None,
    ) -> None:
        self.accelerator = accelerator
        self.max_grad_norm = max_grad_norm
        self.grad_norms = _norms(model, max_grad_norm)
        self.step_begin = step_begin  # as PlainStep's
        self.model = model  # Accelerate's `accumulate` syncs (or not) this one's gradients
        #: what the loss runs: `model`, or `model` compiled
        self.forward = model if forward is None else forward
        self.lr_scheduler = lr_scheduler
        self.compute_loss = compute_loss
        self._wrapped = optimizer
        # Without a scaler, the wrapper only forwards `step()` (after probing packages)
        plain = accelerator.scaler is None and accelerator.distributed_type in _PLAIN_OPTIMIZER_STEP
        self._raw = optimizer.optimizer if plain else None

    def backward(self, batch: Any) -> torch.Tensor:
        acc = self.accelerator
        if self.step_begin is not None:
            self.step_begin()
        with acc.accumulate(self.model):
            with unused_parameters_named(), acc.autocast():
                loss = self.compute_loss(self.forward, batch)
            acc.backward(loss)
        return loss.detach()

    def update(self) -> None:
        # Accelerate counts micro-batches and syncs at every `gradient_accumulation_steps`
        # one, which the trainer's steps are made of: the last backward synced.
        if not self.accelerator.sync_gradients:
            raise RuntimeError("optimizer step before Accelerate synced the gradients")
        clip, norms = self.max_grad_norm, self.grad_norms
        if clip is not None and norms is not None:
            # the synced gradients, unscaled first under a grad scaler (Accelerate's)
            norms.add(self.accelerator.clip_grad_norm_(self.model.parameters(), clip))
        if self._raw is not None:
            self._raw.step()
            self._raw.zero_grad(set_to_none=True)
            stepped = True
        else:
            self._wrapped.step()
            self._wrapped.zero_grad(set_to_none=True)
            stepped = not self.accelerator.optimizer_step_was_skipped
        if self.lr_scheduler is not None and stepped:
            step_scheduler(self.lr_scheduler)


def _sync_setter(accelerator: Accelerator) -> Callable[[bool], None]:
    """What sets `accelerator.sync_gradients` (Accelerate's shared `GradientState`), as
    its `accumulate` does (whose setter adds only an XLA step, for a device `PlainStep`
    never runs on)."""
    state = accelerator.gradient_state

    def set_sync(flag: bool) -> None:
        state.sync_gradients = flag

    return set_sync


def step_scheduler(scheduler: Any) -> None:
    """`scheduler.step()`; what it raises, as the cause of a `SchedulerStepError` (the
    trainer stops there with a checkpoint: `trainer.schedule_end.schedule_failed`)."""
    try:
        scheduler.step()
    except Exception as exc:
        raise SchedulerStepError(scheduler) from exc


def _norms(model: torch.nn.Module, max_grad_norm: float | None) -> GradNorms | None:
    """A `GradNorms` on `model`'s device with ``max_grad_norm``, else None."""
    if max_grad_norm is None:
        return None
    first = next(model.parameters(), None)
    return GradNorms(first.device if first is not None else torch.device("cpu"))


def unit_loss_gradient(accelerator: Accelerator) -> bool:
    """Whether the step's backward seeds each micro-batch's loss with a gradient of
    exactly 1, whichever `TrainStep` runs: no gradient accumulation (both steps divide
    the loss by its steps, Accelerate even by 1, which is exact), no grad scaler (it
    multiplies the loss), not DeepSpeed (which scales the loss its own way). What a
    loss computed another way needs to give the same gradient bits
    (`sample_losses.fused_mse_loss`)."""
    return (
        accelerator.gradient_accumulation_steps == 1
        and accelerator.scaler is None
        and accelerator.distributed_type != DistributedType.DEEPSPEED
    )


def plateau_problem(lr_scheduler: Any | None) -> list[str]:
    """The refusal of a `ReduceLROnPlateau` as the trainer's scheduler (empty: none):
    the trainer steps its scheduler after each optimizer step, with no argument, where
    this one needs the validation metric (torch's bare TypeError at step 0 otherwise).
    Not stepped from the validation either: a plateau scheduler's patience counts
    validations, whose metric a hook sees and may choose (docs/how-to/hooks.md)."""
    if not isinstance(lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        return []
    return [
        "lr_scheduler=ReduceLROnPlateau: the trainer steps its scheduler at each optimizer "
        "step without a metric, which this one needs; pass lr_scheduler=None and step it "
        "yourself in a hook's on_validation_end with the metric, "
        "scheduler.step(metrics['eval_loss']) (docs/how-to/hooks.md, 'A scheduler on "
        "the validation metric')"
    ]


def make_train_step(
    accelerator: Accelerator,
    model: torch.nn.Module,
    optimizer: Any,
    lr_scheduler: Any | None,
    compute_loss: ComputeLoss,
    compile: CompileOptions | None = None,
    max_grad_norm: float | None = None,
) -> TrainStep:
    """The `TrainStep` for this run: `PlainStep` where Accelerate adds nothing (see the
    module docstring), else `AcceleratedStep`. `model` and `optimizer` are the ones
    `accelerator.prepare` returned; `compile` (`TrainingArguments.compile_options`):
    the step's loss runs on `model` compiled with them (at its first call);
    `max_grad_norm` (`TrainingArguments.max_grad_norm`): each update clips the gradients
    to it first (outside the compiled model: eager, CUDA graphs or not), the norms kept
    in the step's `grad_norms` (None: no clipping).

    Raises `ConfigError` (a ValueError: a script's usage error, as a bad option is),
    before anything runs, when the accelerator's device cannot run what is asked (fp16
    on a CPU, CUDA graphs off CUDA: `config.device_checks.device_problems`, which the
    command line's parser runs before the trainer is made), or when `lr_scheduler` is a
    `ReduceLROnPlateau` (its ``step()`` needs a metric, which a step does not have:
    `plateau_problem`); ValueError when `model` is already compiled."""
    acc = accelerator
    problems = device_problems(acc.mixed_precision, compile, acc.device.type)
    problems += plateau_problem(lr_scheduler)
    if max_grad_norm is not None and acc.distributed_type == DistributedType.DEEPSPEED:
        problems.append(  # (its engine clips, at its config's value; Accelerate does not)
            f"max_grad_norm={max_grad_norm!r} under DeepSpeed: set gradient_clipping in "
            "the DeepSpeed config instead, and leave max_grad_norm unset"
        )
    if problems:
        raise ConfigError(problems)
    forward = model
    step_begin = None
    if compile is not None:
        forward = compile_model(model, compile)
        if compile.cuda_graphs:
            # Each micro-batch a new generation of CUDA-graph trees, said rather than
            # inferred: the previous one's outputs (in graph-owned memory, reused by the
            # next replay) are no longer needed; the loss is computed outside the graph.
            step_begin = torch.compiler.cudagraph_mark_step_begin
    else:
        warn_if_compiled(model)
    accumulation = acc.gradient_accumulation_steps
    plain = (
        acc.scaler is None
        and acc.mixed_precision in ("no", "bf16")
        and acc.distributed_type in _PLAIN_OPTIMIZER_STEP
        and (accumulation == 1 or acc.distributed_type == DistributedType.NO)
    )
    if plain:
        autocast = acc.autocast if acc.mixed_precision == "bf16" else None
        return PlainStep(
            forward, optimizer.optimizer, lr_scheduler, compute_loss, accumulation, autocast,
            step_begin, max_grad_norm, _sync_setter(acc),
        )  # fmt: skip
    return AcceleratedStep(
        acc, model, optimizer, lr_scheduler, compute_loss, forward, step_begin, max_grad_norm
    )
