"""Pseudo-epochs: after the stream ends, replay the samples retained in the buffer.

With a FIFO or FIRO buffer every streamed sample is retained (memory grows with the
stream, as in Melissa where the buffer is sized to hold them all); with a reservoir
the retained samples are its current contents. Each replay serves every retained
sample once, then ends like the stream did, until `pseudo_epochs` passes are done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView


class PseudoEpochHook(Hook):
    """Requests a rewind at the end of the stream until `pseudo_epochs` passes are done
    (the live stream counts as the first)."""

    def __init__(self, pseudo_epochs: int) -> None:
        if pseudo_epochs < 1:
            raise ValueError(f"pseudo_epochs must be >= 1, got {pseudo_epochs}")
        self.pseudo_epochs = pseudo_epochs

    def on_end_of_stream(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if state.pseudo_epoch + 1 < self.pseudo_epochs:
            control.should_rewind = True
