"""The hooks a `Study` gives its trainer (`Study.hooks`): how it hears of the run.

A study acts at four points of the trainer's lifecycle, and an adaptive one on what
training computes; each is an event every hook sees (`Event`), which these hooks turn
into calls of the study's public methods:

* `StudyEvents`: SOURCE_STARTED -> `Study.on_all_ranks_started` (rank 0 starts the
  simulations; on resume a collective), END_OF_STREAM -> `Study.on_end_of_stream`,
  PREEMPTED -> `Study.on_preempted` (how long `Study.stop` waits for the last
  simulations), SAVE -> `Study.saved_account` (what a resume from it runs again),
  LOOP_END -> `Study.on_loop_end` (at the end of the stream, rank 0 waits
  for the last simulations' exits before the final log; the source's hooks are installed
  before the built-in and user ones, whose `on_loop_end` sees a running source, as before);
* `AdaptiveFeed`: SIMULATION_LOSSES (fired by the study's `SimulationLossTracker`) ->
  `Study.observe_simulation_losses` (rank 0 feeds each changed simulation's relative
  loss to the launcher's `observe`).

They hold no state of their own (the study's is the source's checkpoint part). Training
thread only, as every hook.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.loss_per_simulation import SimulationLoss
    from melissa_trainer.core.view import TrainerView
    from melissa_trainer.study.study import Study

__all__ = ["AdaptiveFeed", "StudyEvents"]


class StudyEvents(Hook):
    """Tells `study` of the run's lifecycle (module docstring)."""

    def __init__(self, study: Study) -> None:
        self.study = study

    def on_source_started(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        # the trainer's wait watch around a resumed study's gather, as an attribute: a
        # subclass's override of ``on_all_ranks_started(self)`` takes no argument
        self.study.wait_watch = getattr(getattr(trainer, "stop_sync", None), "watch", None)
        # (whether a peer's process is known ended: the account's wait for its last
        # counts stops there, `every_rank`; a trainer without it: none known)
        self.study.peer_ended = getattr(trainer, "peer_ended", None)
        self.study.on_all_ranks_started()

    def on_end_of_stream(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self.study.on_end_of_stream()

    def on_loop_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self.study.on_loop_end(preempted=trainer.preempted_by is not None)

    def on_preempted(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self.study.on_preempted()

    def on_save(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        # every rank (a collective, as the save): rank 0 learns what a resume from `path`
        # runs again, which `Study.stop` says (the launcher's records as `path` has them)
        launcher = self.study.launcher
        self.study.saved_account.saved(
            Path(path),
            trainer.process_index,
            launcher.saved_outcomes,
            launcher.n_simulations,
            trainer.stop_sync.watch,  # (a long wait in its all-gather warns)
        )


class AdaptiveFeed(Hook):
    """Feeds each reduction of the per-simulation losses to `study`'s sampler (module
    docstring)."""

    def __init__(self, study: Study) -> None:
        self.study = study

    def on_simulation_losses(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        updated: Mapping[int, SimulationLoss],
    ) -> None:
        self.study.observe_simulation_losses(updated)
