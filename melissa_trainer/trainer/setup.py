"""What `OnlineTrainer.__init__` builds from its arguments before any loop: the
`Accelerator`, what the trainer reads (`make_data_path`: the source, this rank's buffer,
the dataset, the validation set), its hooks (`make_hooks`), and the claim on
`output_dir` (its lock and the run id, with the source configured under it).

Each function runs once per trainer, on every rank, in the constructor's order; none is
thread-safe (the training thread builds the trainer).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs, KwargsHandler

from melissa_trainer.buffers import Buffer, Sample, make_buffer
from melissa_trainer.buffers.columnar import SAMPLE_READS_MAX_ROW_BYTES
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.core import process_group
from melissa_trainer.core.cpu_launch import cpu_only_launch
from melissa_trainer.core.dataset import (
    Collate,
    ProcessBatch,
    ProcessSample,
    StreamDataset,
    check_device_buffer,
)
from melissa_trainer.core.device_buffer import make_device_buffer
from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.hooks import Hook, HookList, trainer_hooks
from melissa_trainer.sources.ingest_transform import IngestTransform
from melissa_trainer.sources.iterable import as_source
from melissa_trainer.sources.source import Source
from melissa_trainer.trainer.lock_share import lock_output_dir
from melissa_trainer.trainer.output_hold import OutputDirHold
from melissa_trainer.trainer.restart_keys import clear_failed_attempt
from melissa_trainer.trainer.simulation_errors import check_best_metric

__all__ = [
    "DataPath", "claim_output_dir", "make_accelerator", "make_data_path", "make_hooks",
    "make_rank_buffer", "merged_handlers",
]  # fmt: skip

logger = logging.getLogger(__name__)


def make_accelerator(
    args: TrainingArguments, kwargs_handlers: Iterable[KwargsHandler] | None = None
) -> Accelerator:
    """The run's `Accelerator` (CPU only when the launch asks for it: `cpu_only_launch`),
    with the user's `kwargs_handlers` merged with the trainer's (`merged_handlers`).

    The scheduler is stepped by the trainer, once per optimizer step, never by
    Accelerate (``step_scheduler_with_optimizer=False``). The mixed precision is
    ``args.mixed_precision``, resolved when the arguments were made (unset: the
    launch's, `device_checks.resolve_mixed_precision`): given explicitly, Accelerate
    trains in the precision the arguments record. ``args.ddp_find_unused_parameters``
    is given to DDP (`DistributedDataParallelKwargs`; it is ignored without DDP).

    Under several processes, the process group it forms is torn down at the
    interpreter's exit, its gloo threads joined (`process_group`: a complete run's
    exit could otherwise abort).

    Raises:
        RuntimeError: a launch with more processes on a node than it has visible GPUs.
    """
    cpu = cpu_only_launch()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        process_group.prepare()  # before Accelerate forms the group
        if not dist.is_initialized():  # (a torchrun restart: no key of the failed attempt)
            clear_failed_attempt()
    return Accelerator(
        cpu=cpu,
        mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        step_scheduler_with_optimizer=False,
        kwargs_handlers=merged_handlers(args, kwargs_handlers),
    )


def merged_handlers(
    args: TrainingArguments, given: Iterable[KwargsHandler] | None
) -> list[KwargsHandler]:
    """The `Accelerator`'s ``kwargs_handlers``: the user's `given` ones (Accelerate's
    `KwargsHandler` objects: `InitProcessGroupKwargs`, `GradScalerKwargs`,
    `AutocastKwargs`, ...), as given, and the trainer's own, a
    `DistributedDataParallelKwargs` from ``args.ddp_find_unused_parameters``.

    The one class both may set, `DistributedDataParallelKwargs`: the user's is used,
    every field as given, but `find_unused_parameters`, which is on when either side
    turns it on (both default to off, so neither's default overrides the other's
    choice); a copy is changed, never the user's object. A user's
    `InitProcessGroupKwargs` takes effect only where the process group is formed by
    this Accelerator: one formed already (an earlier trainer or Accelerator in this
    process, the user's own ``init_process_group``) keeps its settings, warned of.

    `given` is a list (any iterable) of handlers, as ``Accelerator(kwargs_handlers=...)``
    requires; a single handler is refused, not wrapped, so that code moves between the
    two unchanged.

    Raises:
        TypeError: a single handler rather than a list (saying to pass ``[handler]``); an
            element that is not a `KwargsHandler` (naming it); a subclass of one of
            Accelerate's handler classes (naming both: Accelerate looks handlers up by
            their exact class).
        ValueError: two handlers of one kind (naming both; Accelerate takes one of each).
    """
    if isinstance(given, KwargsHandler):
        raise TypeError(
            f"kwargs_handlers: got one handler, {type(given).__name__}(...), not a list: "
            f"pass kwargs_handlers=[{type(given).__name__}(...)] (a list, as "
            "accelerate.Accelerator(kwargs_handlers=...) requires)"
        )
    handlers = list(given or ())
    seen: dict[type, type] = {}  # Accelerate's class -> the class given for it
    for handler in handlers:
        if not isinstance(handler, KwargsHandler):
            raise TypeError(
                f"kwargs_handlers: {handler!r} is not an Accelerate handler: give instances "
                "of accelerate.utils' *Kwargs classes (InitProcessGroupKwargs(timeout=...), "
                "DistributedDataParallelKwargs(...), GradScalerKwargs(...))"
            )
        given_class = type(handler)
        kind = _accelerate_kind(given_class)
        if kind in seen:
            names = sorted({seen[kind].__name__, given_class.__name__})
            raise ValueError(
                f"kwargs_handlers: two {kind.__name__} handlers"
                + (f" ({names[0]} and {names[1]})" if len(names) == 2 else "")
                + ": give one of each kind (Accelerate takes one), with every setting in it"
            )
        seen[kind] = given_class
    for kind, given_class in seen.items():  # after the duplicates: those name both
        if kind is not given_class:
            raise TypeError(
                f"kwargs_handlers: {given_class.__name__} subclasses {kind.__name__}: "
                f"Accelerate takes only its own classes (it looks a handler up by its exact "
                f"class); give {kind.__name__}(...) with the settings instead"
            )
    for handler in handlers:
        if isinstance(handler, InitProcessGroupKwargs) and dist.is_initialized():
            logger.warning(
                "kwargs_handlers: %r is not applied: this process's process group was "
                "formed before the trainer (an earlier trainer or Accelerator, or "
                "init_process_group) and keeps its settings",
                handler,
            )
    find_unused = args.ddp_find_unused_parameters
    for i, handler in enumerate(handlers):
        if isinstance(handler, DistributedDataParallelKwargs):
            if find_unused and not handler.find_unused_parameters:
                handlers[i] = dataclasses.replace(handler, find_unused_parameters=True)
            return handlers
    return [*handlers, DistributedDataParallelKwargs(find_unused_parameters=find_unused)]


def _accelerate_kind(cls: type) -> type:
    """The class of Accelerate's own (defined in ``accelerate``) that `cls` is or
    derives from, nearest first; `cls` itself when none is (a user's direct
    `KwargsHandler` subclass, refused by Accelerate as it would be given)."""
    for base in cls.__mro__:
        if base is not KwargsHandler and base.__module__.split(".")[0] == "accelerate":
            return base
    return cls


def make_rank_buffer(
    args: TrainingArguments,
    accelerator: Accelerator,
    process_sample: ProcessSample | None,
    collate_fn: Collate | None,
    puts_blocks: bool = True,
) -> Buffer:
    """This rank's buffer, as `args` asks: on the host, or mirrored on the training
    device (``buffer_device="accelerator"``); a host reservoir stores its samples by
    column (`ColumnarReservoirBuffer`) when batches are read as blocks, and for a
    reader of samples (a `process_sample` or `collate_fn`) when the source
    `puts_blocks` (a receiver's) and rows are at most `SAMPLE_READS_MAX_ROW_BYTES`.
    Warns when pseudo-epochs keep every sample.

    Raises:
        ValueError: a device buffer with a `process_sample` or `collate_fn`
            (`check_device_buffer`).
    """
    config = args.buffer_config(process_index=accelerator.process_index)
    buffer: Buffer
    if args.buffer_device == "accelerator":
        check_device_buffer(process_sample, collate_fn)
        buffer = make_device_buffer(config, accelerator.device)
    else:
        # a reservoir stores its samples by column: batches read as blocks (no
        # per-sample function) are one gather per field, as offline's index; read as
        # samples, views of that gather, for rows small enough that the copy costs less
        # than the plain store's per-sample objects (issue 42), when samples come in
        # blocks: one at a time (an in-process source), a put would copy each into its
        # row where the plain store keeps a reference, and the reads cost more
        blocks = process_sample is None and collate_fn is None
        max_row = None if blocks else SAMPLE_READS_MAX_ROW_BYTES
        buffer = make_buffer(config, columnar=blocks or puts_blocks, max_row_bytes=max_row)
    if args.pseudo_epochs > 1 and args.buffer != "reservoir":
        logger.warning(
            "pseudo_epochs=%d with buffer=%s keeps every streamed sample in memory "
            "to replay it; use buffer='reservoir' to bound memory",
            args.pseudo_epochs,
            args.buffer,
        )
    return buffer


class DataPath(NamedTuple):
    """What a trainer reads (`make_data_path`): one-directional, source -> buffer ->
    dataset; and the validation set."""

    source: Source
    buffer: Buffer
    dataset: StreamDataset
    eval_dataset: Sequence[Sample] | None


def make_data_path(
    args: TrainingArguments,
    accelerator: Accelerator,
    train_source: Source | Iterable[Any] | Callable[[int, int], Iterable[Any]],
    transform: IngestTransform | None,
    eval_dataset: Sequence[Sample] | None,
    process_sample: ProcessSample | None,
    collate_fn: Collate | None,
    process_batch: ProcessBatch | None,
) -> DataPath:
    """`eval_dataset` checked and, with an ingest `transform`, transformed once, as the
    stream's samples; the source of `train_source` (`as_source`; configured later, once
    `output_dir` is claimed: `claim_output_dir`), given the transform before it starts;
    this rank's buffer (`make_rank_buffer`) and the dataset that draws batches from it.

    Raises:
        ValueError: an empty `eval_dataset` (None skips validation), or what
            `make_rank_buffer` and `as_source` refuse.
    """
    if eval_dataset is not None and len(eval_dataset) == 0:
        raise ValueError("eval_dataset is empty: pass None to skip validation")
    if transform is not None and eval_dataset is not None:
        eval_dataset = transform.dataset(eval_dataset)  # once, as the stream's samples
    source = as_source(train_source)
    if transform is not None:
        source.set_ingest_transform(transform)  # (before it starts: at train())
    buffer = make_rank_buffer(args, accelerator, process_sample, collate_fn, source.puts_blocks)
    dataset = StreamDataset(
        buffer,
        args.batch_size,
        process_sample,
        collate_fn,
        source=source,
        process_batch=process_batch,
    )
    return DataPath(source, buffer, dataset, eval_dataset)


def make_hooks(
    args: TrainingArguments,
    eval_dataset: Sequence[Sample] | None,
    source: Source,
    user_hooks: Iterable[Hook] | None,
    use_default_hooks: bool,
) -> HookList:
    """Every hook of the trainer, in the order they are called (`hooks.trainer_hooks`:
    the source's, the built-in ones `args` asks for, then `user_hooks`), with
    ``args.metric_for_best_model`` checked against what a validation of `eval_dataset`
    returns (`check_best_metric`).

    Raises:
        ValueError: the source refuses `args` (`Source.hooks`: an adaptive study with
            ``simulation_loss_steps=0``); `ConfigError` (a ValueError): no validation
            returns the metric.
    """
    hooks = HookList(
        trainer_hooks(
            args,
            has_eval=eval_dataset is not None,
            source_hooks=source.hooks(args),
            user_hooks=user_hooks,
            use_default_hooks=use_default_hooks,
        )
    )
    check_best_metric(args.metric_for_best_model, eval_dataset, hooks.eval_keys)
    return hooks


def claim_output_dir(
    output_dir: str, accelerator: Accelerator, source: Source, watch: WaitWatch | None = None
) -> tuple[OutputDirHold, str]:
    """Lock `output_dir` (rank 0; see `output_lock`) before anything is written there,
    then configure `source` in it (a source's `configure` may write) and give it the
    run's identity; returns the hold and the run id (the same on every rank, new at each
    trainer). A collective, inside `watch`'s wait when given (`lock_share`).

    Raises:
        OutputDirLocked: another trainer uses `output_dir` (on every rank).
        Whatever `source.configure` or `set_run_id` raises, the lock given back first.
    """
    rank, world = accelerator.process_index, accelerator.num_processes
    lock, run_id = lock_output_dir(output_dir, rank, world, accelerator.device, watch)
    hold = OutputDirHold(lock, output_dir)
    try:
        source.configure(output_dir)
        source.set_run_id(run_id)
    except BaseException:
        hold.release()
        raise
    return hold, run_id
