"""`TrainerView`: what the layers below the trainer may read of a running trainer;
`CheckpointParts`: the part of it a checkpoint reads (its parts, not the owner).

Hooks (every ``on_*`` method), a study's hooks and the checkpoint's parts are given the
trainer typed as this protocol, never as `OnlineTrainer`: the hooks, the study and the
checkpoint sit below the trainer and never import it (not even for types), and the
protocol is the list of what they may touch. `OnlineTrainer` satisfies it structurally
(mypy checks it wherever the trainer passes itself down). The checkpoint's registry and
its reshard read a narrower protocol, `CheckpointParts`, the stateful parts they save and
load and the rank they run on (as Accelerate's `save_accelerator_state` takes the model,
optimizers, schedulers and scaler, not the `Accelerator`); `TrainerView` extends it.

Contract: a reader may call methods and read attributes from the training thread only
(the trainer is not thread-safe); it may change ``model``/``optimizer`` state only in
the events that document it (see `hooks.base.Event`).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover - types only
    import torch
    from accelerate import Accelerator

    from melissa_trainer.buffers import Buffer
    from melissa_trainer.config.arguments import TrainingArguments
    from melissa_trainer.core.control import TrainerControl
    from melissa_trainer.core.dataset import StreamDataset
    from melissa_trainer.core.figures import LogFigures
    from melissa_trainer.core.loss_per_simulation import SimulationLosses
    from melissa_trainer.core.state import TrainerState
    from melissa_trainer.core.stop_sync import StopSync
    from melissa_trainer.sources.source import Source


class HookDispatch(Protocol):
    """The trainer's hooks, as a checkpoint and a hook see them (`hooks.HookList`)."""

    #: under several ranks, this rank's hook mark (`trainer.hook_mark.HookMark`) while
    #: a `train()` runs; None with one process, or when it could not be made
    marker: Any

    def fire(self, event: Any, *args: Any) -> None: ...

    def get(self, cls: type) -> Any: ...

    def state_dict(self) -> dict[str, dict[str, Any]]: ...

    def load_state_dict(self, states: Mapping[str, Mapping[str, Any]]) -> None: ...


class CheckpointParts(Protocol):
    """What a checkpoint saves and loads (`checkpoint.registry.parts`, `checkpoint.reshard`),
    read-only: each part saves and loads itself in place. No model or optimizer: they
    are Accelerate's to save (through `accelerator`), nor anything of the loop's flow
    (the control flags, the stop sync, the hooks' events)."""

    @property
    def args(self) -> TrainingArguments: ...

    @property
    def accelerator(self) -> Accelerator: ...

    @property
    def buffer(self) -> Buffer: ...

    @property
    def source(self) -> Source: ...

    @property
    def dataset(self) -> StreamDataset: ...

    @property
    def state(self) -> TrainerState: ...

    @property
    def hooks(self) -> HookDispatch: ...

    @property
    def log_figures(self) -> LogFigures: ...

    @property
    def tracked_losses(self) -> SimulationLosses | None: ...

    @property
    def is_main_process(self) -> bool: ...

    @property
    def process_index(self) -> int: ...

    @property
    def num_processes(self) -> int: ...

    @property
    def lr_scheduler(self) -> Any | None:
        """(Its class only: Accelerate saves its state; `checkpoint.scheduler_class`.)"""


class TrainerView(CheckpointParts, Protocol):
    """A running trainer's parts and figures (the attributes of `OnlineTrainer`), read-only
    here: a reader uses the parts, it does not replace them. Its checkpoint's parts
    (`CheckpointParts`), and what hooks read besides."""

    @property
    def model(self) -> torch.nn.Module: ...

    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    @property
    def eval_dataset(self) -> Any | None: ...

    @property
    def control(self) -> TrainerControl: ...

    @property
    def stop_sync(self) -> StopSync: ...

    @property
    def preempted_by(self) -> signal.Signals | None: ...

    @property
    def ended_by(self) -> str:
        """Why the last `train()` ended, in words (`OnlineTrainer.ended_by`)."""
        ...

    @property
    def run_id(self) -> str | None: ...

    @property
    def checkpoint_root(self) -> Path: ...

    @property
    def simulation_losses(self) -> SimulationLosses: ...

    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor: ...

    def log(self) -> dict[str, float]: ...

    def evaluate(self) -> dict[str, float]: ...
