"""The import paths of modules that moved into packages by layer (issue 45), kept working
for one release: importing an old path warns (`DeprecationWarning`, attributed to the
importing line) and gives the module at its new path, the same object.

Installed once, by the package's ``__init__``, as the first finder of `sys.meta_path`
(it answers only for the names in `MOVED`, none of which exists as a file any more).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import warnings
from types import ModuleType

#: old path -> new path; the package's ``__getattr__`` answers ``melissa_trainer.<old>``
MOVED: dict[str, str] = {
    f"melissa_trainer.{old}": f"melissa_trainer.{new}"
    for old, new in {
        "validation": "common.checks",
        "json_output": "common.json_output",
        "checkpoint_migrations": "common.migrations",
        "arguments": "config.arguments",
        "argparser": "config.parser",
        "config_reading": "config.reading",
        "compiled": "core.compiled",
        "state": "core.state",
        "dataset": "core.dataset",
        "staging": "core.staging",
        "sync": "core.stop_sync",
        "loss_guard": "core.loss_guard",
        "accelerated": "core.accelerated",
        "sample_losses": "core.sample_losses",
        "simulation_loss": "core.loss_per_simulation",
        "metrics": "trainer.reporting",
        "checkpoint_errors": "checkpoint.errors",
        "checkpoint_manifest": "checkpoint.manifest",
        "checkpoint_registry": "checkpoint.registry",
        "checkpoint_reshard": "checkpoint.reshard",
        "study_hooks": "study.hooks",
        "trainer_checkpoint": "trainer.checkpointing",
        "preemption": "trainer.preemption",
        "output_lock": "trainer.output_lock",
        "hooks.simulation_losses": "hooks.loss_tracker",
        "buffers.device": "core.device_buffer",
        "stream.protocol": "wire",
        "stream.protocol.checks": "wire.checks",
        "stream.protocol.decoding": "wire.decoding",
        "stream.protocol.encoding": "wire.encoding",
        "stream.protocol.layout": "wire.layout",
        "stream.protocol.messages": "wire.messages",
        "trainer.refusal": "common.refusal",  # (the parser, in config/, says errors once too)
    }.items()
}


def _stacklevel() -> int:
    """The `warnings.warn` stack level, from `warn_moved`, of the first frame outside this
    module: the line that imported the old path. The import system's own frames are not
    counted (`warnings` skips them, as it skips any ``importlib._bootstrap`` frame)."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # warn_moved's
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if not internal and name != __file__:
            return level
        if not internal:
            level += 1
        frame = frame.f_back
    return level


def warn_moved(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}: import it from there (the old path works until the next release)",
        DeprecationWarning,
        stacklevel=_stacklevel(),
    )


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the import system returns what
    ``sys.modules`` holds for the name once `exec_module` returns)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a blank module, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        warn_moved(module.__name__, self.new)
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths in `MOVED`, and nothing else."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Adds the finder to `sys.meta_path` once (idempotent: a reloaded package does not
    add a second)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())  # before a stale file of an old install
