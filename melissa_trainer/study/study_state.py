"""`StudyState`: a `Study`'s part of a checkpoint, a base class of it.

What each rank's checkpoint holds of the study (`state_dict`: the stream's record,
and rank 0's launcher record under ``"launcher"``), how a resume reads it back
(`load_state_dict`: checked at once, applied when rank 0 starts the launcher,
`Study.on_all_ranks_started`) and how it is resharded for another number of ranks
(`reshard_state`). `Study` sets the attributes declared here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.simulation_record import SavedStudy
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.saved_account import SavedAccount

__all__ = ["StudyState"]


class StudyState:
    """The checkpointed state of a `Study` (which sets the attributes declared here)."""

    launcher: Launcher
    stream: StreamSource
    #: what a resume from the last checkpoint does (`SavedAccount`)
    saved_account: SavedAccount
    #: the launcher runs (rank 0 only)
    _started: bool
    #: the launcher's record loaded (rank 0, resumed), kept until it starts
    _launcher_state: dict[str, Any] | None
    #: rank 0, resumed: the launcher's record as read and checked at load
    _launcher_saved: SavedStudy | None
    #: loaded from a checkpoint (`on_all_ranks_started` then gathers the complete ones)
    _resumed: bool

    def state_dict(self) -> dict[str, Any]:
        """The stream's record, and on rank 0 the launcher's under ``"launcher"``."""
        state = self.stream.state_dict()
        self.saved_account.taken(state)  # (what this rank's checkpoint holds: `hooks`)
        if self._started:
            return dict(state, launcher=self.launcher.state_dict())
        if self._launcher_state:  # loaded, not started yet: keep it
            return dict(state, launcher=self._launcher_state)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` (before `start`); the launcher's record is applied
        when rank 0 starts it, but checked now (the trainer loads the source's state
        first): a study resumed with settings it cannot follow (another sampler, seed
        or ranges; a Latin hypercube's size changed...) is refused before anything of
        the checkpoint is loaded (`Launcher.check_resume`, a ValueError). The record is
        read once, here (migrated, its simulations' records built), and applied at
        start without reading it again (`Launcher.resume`)."""
        state = dict(state or {})
        launcher_state = state.pop("launcher", None)
        saved = self.launcher.check_resume(launcher_state) if launcher_state else None
        self.stream.load_state_dict(state)
        self._launcher_state = launcher_state or None
        self._launcher_saved = saved  # read once here; applied at start
        self._resumed = True

    def reshard_state(
        self,
        states: Sequence[dict[str, Any]],
        buffer_puts: Sequence[int],
        rank: int,
        world_size: int,
        buffer_put: int,
    ) -> dict[str, Any]:
        """The stream's records resharded (`StreamSource.reshard_state`); the launcher's
        record, which only old rank 0 holds, goes to new rank 0 alone, unchanged."""
        stream = [{k: v for k, v in (s or {}).items() if k != "launcher"} for s in states]
        state = self.stream.reshard_state(stream, buffer_puts, rank, world_size, buffer_put)
        launcher = states[0].get("launcher") if states and states[0] else None
        if rank == 0 and launcher:
            state = dict(state, launcher=launcher)
        return state
