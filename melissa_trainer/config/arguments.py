"""`TrainingArguments`: every option of an online training run, validated in one go.

Names follow Hugging Face `transformers` / `accelerate` and Melissa (`buffer`,
`watermark`...). Every problem is reported together in one `ConfigError`, one per line,
naming the field, its value and the fix. Reading files and converting values is
`reading`'s; what the values become when the class is made,
`argument_values`'; its rules, `argument_checks`' (the buffer's stated by `BufferConfig`);
what making it checks (the names, the values together, the warnings), `argument_making`';
writing and reading back a file, `arguments_file`'s (`ArgumentsFile`, a base); what the
fields resolve to (the logging directory, the buffer's configuration, the compile
options), `arguments_resolved`'s (`ResolvedArguments`, the other base). Most of
this module is the fields' documentation (the user's reference), kept next to them.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Any

from melissa_trainer.buffers.config import (
    DEFAULT_BUFFER,
    DEFAULT_BUFFER_SIZE,
    DEFAULT_SAMPLE_TO_INSERT_RATIO,
    DEFAULT_WATERMARK,
)
from melissa_trainer.config.argument_checks import (
    BUFFER_CHOICES,
    BUFFER_DEVICE_CHOICES,
    MIXED_PRECISION_CHOICES,
    ON_SAVE_ERROR_CHOICES,
    REPORT_TO_CHOICES,
)
from melissa_trainer.config.argument_making import refuse_unknown_names, settle_values

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.config.arguments_file import ARGS_FILE as ARGS_FILE
from melissa_trainer.config.arguments_file import ArgumentsFile
from melissa_trainer.config.arguments_resolved import ResolvedArguments
from melissa_trainer.config.reading import FALSE_WORDS as FALSE_WORDS
from melissa_trainer.config.reading import NONE_WORDS as NONE_WORDS
from melissa_trainer.config.reading import TRUE_WORDS as TRUE_WORDS
from melissa_trainer.config.reading import ConfigError as ConfigError
from melissa_trainer.config.reading import ConversionError as ConversionError
from melissa_trainer.config.reading import UnknownArgumentError as UnknownArgumentError
from melissa_trainer.config.reading import convert_value as convert_value
from melissa_trainer.config.reading import load_config_file as load_config_file
from melissa_trainer.config.reading import unknown_key_problems as unknown_key_problems
from melissa_trainer.config.reading import unwrap_optional as unwrap_optional

__all__ = ["TrainingArguments"]


def _f(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field with a CLI help text (and choices, shown by --help)."""
    metadata: dict[str, Any] = {"help": help}
    if choices is not None:
        metadata.update(help=f"{help} One of: {', '.join(choices)}.", choices=choices)
    return field(default=default, metadata=metadata)


@dataclass
class TrainingArguments(ArgumentsFile, ResolvedArguments):
    """Options of an online training run (like `transformers.TrainingArguments`).

    Steps are optimizer steps: one step spans `gradient_accumulation_steps` batches.
    Written and read back as a file by its base, `ArgumentsFile` (`to_dict`, `to_json`,
    `from_dict`, `from_file`).

    Attributes:
        output_dir: directory for checkpoints and logs. Default ``"outputs"``.
        logging_dir: TensorBoard directory; None means ``{output_dir}/runs`` (see
            `resolved_logging_dir`). Default None.
        seed: random seed of the buffers' draws, the data order and everything random
            during training (`OnlineTrainer` seeds every rank with it when it is made),
            in [0, 2**32 - 1]. The model's initial weights come from the state of the
            random generators when you build it, before the trainer exists: seed them
            yourself first (``torch.manual_seed(args.seed)``) for the same weights in
            every run. Default 42.
        batch_size: samples per batch on each device (per-device batch size). Must be
            <= `buffer_size`, otherwise a batch could never be read while streaming.
            Default 32.
        gradient_accumulation_steps: batches accumulated per optimizer step. Default 1.
        mixed_precision: ``"no"``, ``"fp16"`` or ``"bf16"`` (passed to Accelerate).
            Unset (None): the launch's (``accelerate launch --mixed_precision``, or its
            ``accelerate config`` file), else ``"no"``; set, it wins over the launch's,
            with a warning naming both when the launch asks for fp16 or bf16
            (`device_checks.resolve_mixed_precision`). Made, it holds the one used.
            Default None (unset).
        max_grad_norm: clip the gradients' total norm to this (> 0, finite) before each
            optimizer step (``clip_grad_norm_``; under fp16 unscaled first) and log the
            steps' mean norm before clipping as ``grad_norm``. Default None: no clipping
            (HF clips at 1.0; here a run trains as before this option, to the bit).
        max_steps: stop after this many optimizer steps; None lets the stream (and
            `pseudo_epochs`) decide when training ends. Default None.
        logging_steps: log the training loss every this many steps. Default 50.
        eval_steps: validate every this many steps; None validates only at the end
            (when an eval dataset is given). Default None.
        save_steps: save a checkpoint every this many steps; None: none by steps (the
            checkpoints every `save_seconds`, 600 s by default, and at the end, see
            `save_at_end`, are written either way). Default None.
        save_seconds: save a checkpoint every this many seconds of wall time (> 0,
            finite), by rank 0's clock, counted from the start of `train` and from each
            save (any save: one of `save_steps` restarts it, and a timed save that one
            already covered is dropped). Every rank saves at the same step: the request
            travels with the stop flag, so it lands up to two stop windows late (up to
            ``2 * stop_sync_steps`` steps; `hooks.flow.FlowHook`). None: by steps and
            at the end only. Default 600: a ``kill -9`` loses at most 10 minutes and two
            windows; a run shorter than that writes no timed checkpoint, and a save of a
            default-sized buffer (about 1 s at most, docs/resume.md) costs a longer one
            < 0.2% of it.
        save_at_end: save a checkpoint when training ends. Default True.
        max_to_keep: number of newest checkpoints kept in `output_dir` (>= 1). Default 3.
        on_save_error: what a failed save (a full disk, say) does, on every rank:
            ``"stop"`` raises `CheckpointSaveError` (training ends, non-zero exit), or
            ``"continue"`` logs the error and trains on without that checkpoint.
            Either way the partial checkpoint is removed. At the end nothing is left
            to train on: a failed final save raises `FinalCheckpointSaveError` either
            way (a preemption's under ``"continue"``: `Preempted`). Default ``"stop"``.
        resume_from_checkpoint: checkpoint directory to resume from, or ``"latest"`` for
            the newest checkpoint in `output_dir` (True, as Hugging Face's, or the word
            ``"true"``, any case, is ``"latest"``; False or ``"false"`` None, even where
            such a directory exists, ``./true``: a flag means one thing wherever it
            runs). Default None (start afresh: refused when `output_dir` holds
            checkpoints of an earlier run, see `overwrite_output_dir`).
        overwrite_output_dir: start afresh in an `output_dir` whose ``checkpoints``
            folder holds an earlier run's checkpoints: `train` moves that folder to
            ``checkpoints-previous-TIME`` beside it (nothing is deleted) before anything
            starts, and the default TensorBoard folder ``runs`` to ``runs-previous-TIME``
            (not a `logging_dir` given). Without it such a start is refused (a later
            ``"latest"`` would pick the newest step of either run). Not with
            `resume_from_checkpoint`. Default False.
        buffer: buffer policy, case-insensitive: ``"fifo"`` (first in, first out; each
            sample used once), ``"firo"`` (first in, random out; each sample used once)
            or ``"reservoir"`` (random subset; samples may be drawn several times).
            Default ``"reservoir"`` (with the default ratio: each sample trained on
            about 16 times; docs/concepts/buffers.md says why).
        buffer_size: maximum number of samples held in memory per rank. Default 10000.
        buffer_device: ``"host"`` (the buffer's samples in host memory; each batch is
            copied to the device) or ``"accelerator"`` (a reservoir whose samples are
            also held on the training device, copied there once as they arrive; batches
            are gathered there: `melissa_trainer.core.device_buffer`). ``"accelerator"``
            needs ``buffer="reservoir"`` and batches made from whole blocks (neither
            `process_sample` nor `collate_fn`; a `process_batch` then receives a
            `DeviceBlock` whose ``fields`` are tensors on the device). Default
            ``"host"``.
        watermark: the fewest samples the buffer must hold for a batch to be drawn, in
            [1, `buffer_size`]: every read waits while it holds fewer (not only the
            first), until the stream ends, when the buffer drains. Default 1.
        pseudo_epochs: passes over the data (>= 1): values > 1 replay the samples still
            in the buffer after the stream ends, `pseudo_epochs - 1` more times. Works
            with every buffer, including ``"reservoir"`` (it replays its retained
            subset). Default 1.
        max_sample_reuse: reservoir only: the most times one sample may be drawn
            (>= 1, and >= `sample_to_insert_ratio` when both are set); None means
            unbounded. Default None.
        draw_choices: reservoir only: each draw takes the least-drawn of this many
            uniformly random held samples (1 to 1024): 1 draws uniformly; more spread
            the draws more evenly over the stream, towards the samples streamed last
            (a recency bias: on the heat benchmark the model came out worse,
            docs/when-online-pays.md). Default 1.
        sample_to_insert_ratio: reservoir only: target number of samples drawn per
            sample inserted (>= 0); training waits for data when it runs ahead of the
            stream by more than `sample_to_insert_tolerance` samples, and the stream
            waits (back-pressure) when training lags further behind. 0 disables this
            rate limit (the reservoir then draws as fast as training runs). None (unset)
            means ``DEFAULT_SAMPLE_TO_INSERT_RATIO`` (16, capped at `max_sample_reuse`)
            with a reservoir and no limit with FIFO / FIRO (see
            `resolve_sample_to_insert_ratio`). Default None.
        sample_to_insert_tolerance: reservoir only, with `sample_to_insert_ratio`: how
            far (in samples drawn) training may run ahead of ``ratio * inserted``. Must be
            >= ``ratio + batch_size`` and >= ``ratio * (batch_size - watermark)``. None
            means ``max(4 * batch_size * gradient_accumulation_steps, ratio * watermark +
            batch_size, ratio * (batch_size - watermark))`` (see
            `BufferConfig.resolved_tolerance`). Default None.
        stage_batches: collate the next batch one step ahead and, on a CUDA device,
            copy it through reused pinned host memory on a side stream, so that the copy
            overlaps the step before (`melissa_trainer.core.staging`); the same batches and
            losses either way. False: each batch is collated and sent with Accelerate's
            ``send_to_device`` when its step starts. Default True.
        torch_compile: compile the model the training step runs with `torch.compile`
            (as in `transformers`): the first steps compile (seconds to minutes), later
            ones run the compiled code. ``trainer.model``, validation and checkpoints stay
            eager: a checkpoint loads with or without compilation (see
            `melissa_trainer.core.compiled`). Default False.
        torch_compile_backend: a backend of `torch.compile` (``"inductor"``,
            ``"cudagraphs"`` for CUDA graphs alone, ``"aot_eager"``...); setting it sets
            `torch_compile`. None: ``"inductor"`` when compiling. Default None.
        torch_compile_mode: inductor's mode: ``"default"``, ``"reduce-overhead"`` (CUDA
            graphs: a small model's step becomes a few launches), ``"max-autotune"``
            (kernel search, and CUDA graphs), ``"max-autotune-no-cudagraphs"``; setting
            it sets `torch_compile`. CUDA graphs are refused off CUDA. Default None.
        stop_sync_steps: steps between all-reduces of the stop flag across ranks (>= 1);
            larger values cost less but stop later: a stop takes effect at the end of its
            window with one process, of the next under several ranks (their agreement is
            read a window after it starts: the host never waits for the device). Default 8.
        simulation_loss_steps: reduce the per-simulation training losses over ranks
            every this many steps (`OnlineTrainer.simulation_losses`; an adaptive
            sampler steers the study with them). None: every
            ``DEFAULT_SIMULATION_LOSS_STEPS`` steps when the source asks for them (a
            `Study` whose sampler is adaptive), else off; 0: off. Default None.
        report_to: ``"tensorboard"`` or ``"none"`` (one; Hugging Face's list of names is
            taken when it names one, ``[]`` is ``"none"``). Default ``"tensorboard"``.
        disable_progress_bar: hide the progress bar. Default False: the bar is drawn
            where standard error is a terminal (or a notebook), never into a file or a
            pipe (a redirected log), as tqdm's ``disable=None`` decides.
        ddp_find_unused_parameters: under several ranks, DDP's ``find_unused_parameters``
            (Hugging Face's name; given to Accelerate as `DistributedDataParallelKwargs`):
            for a model with parameters that a step's forward does not use. Default False.
        early_stopping_patience: stop after this many validations in a row without
            improvement of `metric_for_best_model` (>= 1); None disables early
            stopping. Has no effect without an eval dataset. Default None.
        metric_for_best_model: validation metric that decides the best model and early
            stopping. Default ``"eval_loss"``.
        greater_is_better: whether a larger `metric_for_best_model` is better.
            Default False. True with a metric whose name ends in ``loss`` (the
            default ``eval_loss``) is warned of when the arguments are made: a
            larger loss would count as better.
    """

    output_dir: str = _f("outputs", "Directory for checkpoints and logs.")
    logging_dir: str | None = _f(None, "TensorBoard log directory (default: OUTPUT_DIR/runs).")
    seed: int = _f(42, "Random seed, in [0, 2**32 - 1].")
    batch_size: int = _f(32, "Samples per batch on each device.")
    gradient_accumulation_steps: int = _f(1, "Batches accumulated per optimizer step.")
    mixed_precision: str = _f(
        None, "Mixed precision (default: the launch's --mixed_precision, else no).",
        MIXED_PRECISION_CHOICES,
    )  # fmt: skip
    max_grad_norm: float | None = _f(
        None, "Clip gradients to this total norm; log grad_norm (default: no clipping)."
    )
    max_steps: int | None = _f(None, "Stop after this many steps (default: when the stream ends).")
    logging_steps: int = _f(50, "Log every this many optimizer steps.")
    eval_steps: int | None = _f(None, "Validate every this many steps (default: only at the end).")
    save_steps: int | None = _f(
        None,
        "Checkpoint every this many steps (default: none by steps; checkpoints still "
        "come every --save_seconds, 600 s by default, and at the end unless "
        "--no_save_at_end).",
    )
    save_seconds: float | None = _f(
        600.0,
        "Checkpoint every this many seconds of wall time, by rank 0's clock, besides "
        "those every --save_steps and at the end (none: by --save_steps and at the end "
        "only); a kill -9 loses at most this much training, plus the steps the ranks "
        "take to agree on the save: up to 2 x --stop_sync_steps, 16 by default (default: "
        "600; a save of a default-sized buffer takes about 1 s at most: < 0.2% of the "
        "time).",
    )
    save_at_end: bool = _f(True, "Save a checkpoint when training ends.")
    max_to_keep: int = _f(3, "Number of newest checkpoints kept.")
    on_save_error: str = _f(
        "stop", "What a failed save does: stop training, or continue without it "
        "(a failed final save fails the run either way).", ON_SAVE_ERROR_CHOICES,
    )  # fmt: skip
    resume_from_checkpoint: str | None = _f(
        None, "Checkpoint directory to resume from, or 'latest' (newest in OUTPUT_DIR); "
        "true (as Hugging Face's True) is latest, false none (a directory named true: ./true)."
    )  # fmt: skip
    overwrite_output_dir: bool = _f(
        False,
        "Start afresh although OUTPUT_DIR holds an earlier run's checkpoints: they are "
        "moved to OUTPUT_DIR/checkpoints-previous-TIME, its TensorBoard runs/ to "
        "runs-previous-TIME (nothing is deleted).",
    )
    buffer: str = _f(
        DEFAULT_BUFFER,
        "Buffer policy (default: reservoir, each sample drawn sample_to_insert_ratio times).",
        BUFFER_CHOICES,
    )
    buffer_size: int = _f(
        DEFAULT_BUFFER_SIZE, "Maximum number of samples in the buffer (per rank)."
    )
    buffer_device: str = _f(
        "host",
        "Where the buffer's samples live: host, or accelerator (a reservoir mirrored on "
        "the training device; batches gathered there).",
        BUFFER_DEVICE_CHOICES,
    )
    watermark: int = _f(
        DEFAULT_WATERMARK,
        "Fewest samples the buffer must hold for a batch to be drawn: every read waits "
        "while it holds fewer, until the stream ends.",
    )
    pseudo_epochs: int = _f(1, "Passes over the data; > 1 replays the buffer after the stream.")
    max_sample_reuse: int | None = _f(
        None, "Reservoir only: most times one sample may be drawn (default: unbounded)."
    )
    draw_choices: int = _f(
        1, "Reservoir only: each draw takes the least-drawn of this many random samples."
    )
    sample_to_insert_ratio: float | None = _f(
        None,
        "Reservoir only: target samples drawn per sample inserted; 0: no rate limit "
        f"(default: {DEFAULT_SAMPLE_TO_INSERT_RATIO:g} with a reservoir).",
    )
    sample_to_insert_tolerance: float | None = _f(
        None,
        "Reservoir only: how far (in samples) training may run ahead of ratio * inserted "
        "(default: max(4 * batch_size * gradient_accumulation_steps, "
        "ratio * watermark + batch_size, ratio * (batch_size - watermark))).",
    )
    stage_batches: bool = _f(
        True, "Collate the next batch a step ahead; on CUDA copy it on a side stream."
    )
    torch_compile: bool = _f(False, "Compile the training step's model with torch.compile.")
    torch_compile_backend: str | None = _f(
        None, "torch.compile backend; sets torch_compile (default: inductor)."
    )
    torch_compile_mode: str | None = _f(
        None,
        "torch.compile mode of inductor (reduce-overhead: CUDA graphs); sets torch_compile.",
    )
    stop_sync_steps: int = _f(
        8,
        "Steps between all-reduces of the stop flag across ranks; under several ranks a "
        "stop takes effect at the end of the next window.",
    )
    simulation_loss_steps: int | None = _f(
        None,
        "Reduce per-simulation training losses every this many steps (0: off; default: "
        "every 20 steps when the study's sampler is adaptive, else off).",
    )
    report_to: str = _f("tensorboard", "Where to report metrics.", REPORT_TO_CHOICES)
    disable_progress_bar: bool = _f(
        False, "Hide the progress bar (drawn only where stderr is a terminal: none in a log file)."
    )
    ddp_find_unused_parameters: bool = _f(
        False, "DDP's find_unused_parameters: parameters a forward does not use (several ranks)."
    )
    early_stopping_patience: int | None = _f(
        None, "Stop after this many validations without improvement (default: never)."
    )
    metric_for_best_model: str = _f("eval_loss", "Validation metric deciding the best model.")
    greater_is_better: bool = _f(
        False,
        "Whether a larger metric_for_best_model is better (True with a metric named "
        "*loss, the default eval_loss, is warned of: a larger loss would count as better).",
    )

    # ------------------------------------------------------------------ validation

    def __new__(cls, *args: Any, **kwargs: Any) -> TrainingArguments:
        # (`argument_making`: before the dataclass's __init__ would raise a bare TypeError)
        refuse_unknown_names(cls, kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        settle_values(self, _field_types())  # (`argument_making`: converted, checked, warned)


@functools.cache
def _field_types() -> dict[str, Any]:
    """Resolved annotations of TrainingArguments' own fields."""
    hints = typing.get_type_hints(TrainingArguments)
    return {f.name: hints[f.name] for f in dataclasses.fields(TrainingArguments)}
