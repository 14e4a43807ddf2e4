"""melissa-trainer: online training of neural surrogates on streamed simulation data.

The public API; see README.md for a tour and `hooks.base.Event` for the loop.
"""

from melissa_trainer.argparser import ArgumentParser
from melissa_trainer.arguments import ConfigError, TrainingArguments
from melissa_trainer.buffers import (
    Buffer,
    BufferClosedError,
    BufferStats,
    FIFOBuffer,
    FIROBuffer,
    RateLimiter,
    ReservoirBuffer,
    Sample,
    make_buffer,
)
from melissa_trainer.dataset import StreamDataset, fast_collate, stack_samples, to_tensors
from melissa_trainer.hooks import (
    CheckpointHook,
    EarlyStoppingHook,
    Event,
    Hook,
    HookList,
    ProgressHook,
    PseudoEpochHook,
    TensorBoardHook,
    ValidationHook,
    default_hooks,
)
from melissa_trainer.sources import IterableSource, Source, SourceError
from melissa_trainer.state import TrainerControl, TrainerState
from melissa_trainer.trainer import OnlineTrainer

__version__ = "0.1.0"

__all__ = [
    "ArgumentParser",
    "Buffer",
    "BufferClosedError",
    "BufferStats",
    "CheckpointHook",
    "ConfigError",
    "EarlyStoppingHook",
    "Event",
    "FIFOBuffer",
    "FIROBuffer",
    "Hook",
    "HookList",
    "IterableSource",
    "OnlineTrainer",
    "ProgressHook",
    "PseudoEpochHook",
    "RateLimiter",
    "ReservoirBuffer",
    "Sample",
    "Source",
    "SourceError",
    "StreamDataset",
    "TensorBoardHook",
    "TrainerControl",
    "TrainerState",
    "TrainingArguments",
    "ValidationHook",
    "default_hooks",
    "fast_collate",
    "make_buffer",
    "stack_samples",
    "to_tensors",
]
