"""melissa-trainer: online training of neural surrogates on streamed simulation data.

The public API; see README.md and the user guide (docs/, `mkdocs serve`) for a tour,
and `hooks.base.Event` for the loop.

Names are imported on first use (PEP 562), so that `import melissa_trainer.client` in
a simulation loads numpy and pyzmq only, never torch or accelerate.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from melissa_trainer import _moved

_moved.install()  # the modules' old paths, for one release (`_moved.MOVED`)

if TYPE_CHECKING:  # pragma: no cover - the eager imports, for type checkers
    from melissa_trainer.buffers import (
        Buffer,
        BufferClosedError,
        BufferConfig,
        BufferStats,
        FIFOBuffer,
        FIROBuffer,
        RateLimiter,
        ReservoirBuffer,
        Sample,
        SampleBlock,
        make_buffer,
    )
    from melissa_trainer.checkpoint.errors import CheckpointError, CheckpointSaveError
    from melissa_trainer.config.arguments import TrainingArguments
    from melissa_trainer.config.parser import ArgumentParser
    from melissa_trainer.config.reading import ConfigError
    from melissa_trainer.core.control import TrainerControl
    from melissa_trainer.core.dataset import StreamDataset, fast_collate, to_tensors
    from melissa_trainer.core.loss_guard import NonFiniteLossError
    from melissa_trainer.core.loss_per_simulation import SimulationLoss, SimulationLosses
    from melissa_trainer.core.state import TrainerState
    from melissa_trainer.core.view import TrainerView
    from melissa_trainer.hooks import (
        EarlyStoppingHook,
        Event,
        FlowHook,
        Hook,
        HookList,
        ProgressHook,
        PseudoEpochHook,
        ServingHook,
        SimulationLossTracker,
        TensorBoardHook,
        default_hooks,
    )
    from melissa_trainer.launcher import (
        AdaptiveSampler,
        BreedSampler,
        CallableSampler,
        HaltonSampler,
        LatinHypercubeSampler,
        Launcher,
        LauncherError,
        LauncherTuning,
        ListSampler,
        LocalBackend,
        Sampler,
        SobolSampler,
        UniformSampler,
        make_backend,
        make_sampler,
    )
    from melissa_trainer.launcher.backends import MpiexecBackend, SlurmBackend
    from melissa_trainer.sources.ingest_transform import IngestTransformError
    from melissa_trainer.sources.iterable import IterableSource
    from melissa_trainer.sources.source import Source, SourceError
    from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning
    from melissa_trainer.stream.stream_source import StreamSource
    from melissa_trainer.study.study import Study
    from melissa_trainer.trainer.loop import OnlineTrainer
    from melissa_trainer.trainer.preempted import Preempted
    from melissa_trainer.trainer.preemption import PreemptionHandler
    from melissa_trainer.trainer.refusals import REFUSALS, refusals_end_the_program
    from melissa_trainer.trainer.schedule_end import ScheduleEnded

__version__ = "0.1.0"

__all__ = [
    "AdaptiveSampler",
    "ArgumentParser",
    "BreedSampler",
    "Buffer",
    "BufferClosedError",
    "BufferConfig",
    "BufferStats",
    "CallableSampler",
    "CheckpointError",
    "CheckpointSaveError",
    "ConfigError",
    "EarlyStoppingHook",
    "Event",
    "FIFOBuffer",
    "FlowHook",
    "FIROBuffer",
    "HaltonSampler",
    "Hook",
    "HookList",
    "IngestTransformError",
    "IterableSource",
    "LatinHypercubeSampler",
    "Launcher",
    "LauncherError",
    "LauncherTuning",
    "ListSampler",
    "LocalBackend",
    "MpiexecBackend",
    "NonFiniteLossError",
    "OnlineTrainer",
    "Preempted",
    "PreemptionHandler",
    "ProgressHook",
    "PseudoEpochHook",
    "ServingHook",
    "RateLimiter",
    "ReceiverConfig",
    "ReceiverTuning",
    "REFUSALS",
    "ReservoirBuffer",
    "Sample",
    "SampleBlock",
    "Sampler",
    "ScheduleEnded",
    "SimulationLoss",
    "SimulationLosses",
    "SimulationLossTracker",
    "SlurmBackend",
    "SobolSampler",
    "Source",
    "SourceError",
    "StreamDataset",
    "StreamSource",
    "Study",
    "TensorBoardHook",
    "TrainerControl",
    "TrainerState",
    "TrainerView",
    "TrainingArguments",
    "UniformSampler",
    "default_hooks",
    "fast_collate",
    "make_backend",
    "make_buffer",
    "make_sampler",
    "refusals_end_the_program",
    "to_tensors",
]

_MODULES = {
    "ArgumentParser": "config.parser",
    "ConfigError": "config.reading",
    "TrainingArguments": "config.arguments",
    "Buffer": "buffers",
    "BufferClosedError": "buffers",
    "BufferConfig": "buffers",
    "BufferStats": "buffers",
    "FIFOBuffer": "buffers",
    "FIROBuffer": "buffers",
    "RateLimiter": "buffers",
    "ReservoirBuffer": "buffers",
    "Sample": "buffers",
    "SampleBlock": "buffers",
    "make_buffer": "buffers",
    "StreamDataset": "core.dataset",
    "fast_collate": "core.dataset",
    "to_tensors": "core.dataset",
    "EarlyStoppingHook": "hooks",
    "Event": "hooks",
    "FlowHook": "hooks",
    "Hook": "hooks",
    "HookList": "hooks",
    "ProgressHook": "hooks",
    "PseudoEpochHook": "hooks",
    "ServingHook": "hooks",
    "SimulationLossTracker": "hooks",
    "TensorBoardHook": "hooks",
    "default_hooks": "hooks",
    "IngestTransformError": "sources",
    "IterableSource": "sources",
    "Source": "sources",
    "SourceError": "sources",
    "SimulationLoss": "core.loss_per_simulation",
    "SimulationLosses": "core.loss_per_simulation",
    "NonFiniteLossError": "core.loss_guard",
    "CheckpointError": "checkpoint.errors",
    "CheckpointSaveError": "checkpoint.errors",
    "Preempted": "trainer.preempted",
    "PreemptionHandler": "trainer.preemption",
    "ScheduleEnded": "trainer.schedule_end",
    "TrainerControl": "core.control",
    "TrainerState": "core.state",
    "TrainerView": "core.view",
    "StreamSource": "stream.stream_source",
    "Study": "study.study",
    "ReceiverConfig": "stream.receiver_config",
    "ReceiverTuning": "stream.receiver_config",
    **dict.fromkeys(
        [
            "AdaptiveSampler",
            "BreedSampler",
            "CallableSampler",
            "HaltonSampler",
            "LatinHypercubeSampler",
            "Launcher",
            "LauncherError",
            "LauncherTuning",
            "ListSampler",
            "LocalBackend",
            "Sampler",
            "SobolSampler",
            "UniformSampler",
            "make_backend",
            "make_sampler",
        ],
        "launcher",
    ),
    "MpiexecBackend": "launcher.backends",
    "SlurmBackend": "launcher.backends",
    "OnlineTrainer": "trainer.loop",
    "REFUSALS": "trainer.refusals",
    "refusals_end_the_program": "trainer.refusals",
}


def __getattr__(name: str) -> Any:
    moved = _moved.MOVED.get(f"melissa_trainer.{name}")
    if moved is not None:  # a moved module reached as an attribute of the package
        return importlib.import_module(f"melissa_trainer.{name}")
    module = _MODULES.get(name)
    if module is None and name in _hf_classes():
        # an ImportError: `from melissa_trainer import TrainerCallback` turns an
        # AttributeError into its own "cannot import name", dropping these words
        raise ImportError(
            f"cannot import name {name!r} from 'melissa_trainer': Hugging Face's "
            f"(transformers'); here: {_hf_classes()[name]}",
            name=__name__,
        )
    if module is None:
        raise AttributeError(f"module 'melissa_trainer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"melissa_trainer.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def _hf_classes() -> Mapping[str, str]:
    """`config.hf_trainer_names.HF_CLASSES`, imported when a missing name is asked for only."""
    from melissa_trainer.config.hf_trainer_names import HF_CLASSES

    return HF_CLASSES


def __dir__() -> list[str]:
    """The public API (what an IDE or ``help()`` offers): `__all__`, the subpackages
    already imported (as a package's `dir` has them: one not imported is no attribute
    yet) and the dunders; not the helpers this module imports for itself (`Any`,
    `importlib`...), nor the deprecated old paths."""
    dunders = {n for n in globals() if n.startswith("__") and n.endswith("__")}
    subpackages = {  # (not `importlib`, not the private `_moved`)
        n
        for n, v in globals().items()
        if not n.startswith("_") and isinstance(v, ModuleType) and v.__name__ == f"{__name__}.{n}"
    }
    return sorted({*__all__, *dunders, *subpackages})
