"""`StreamSourceRecord`: a `StreamSource`'s record in checkpoints, a base class of it.

The record is each rank's receiver's (its dedup record: which simulations and steps it
has, `Receiver.state_dict`): `state_dict` gives it (the one loaded, before `start`),
`load_state_dict` takes it back before `start` and refuses a study's (a `Study` resumes
those), `reshard_state` merges and re-splits the records of k old ranks over the new
ranks (`melissa_trainer.stream.reshard`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from melissa_trainer.sources.source import Source
from melissa_trainer.stream.reshard import reshard_states

if TYPE_CHECKING:  # pragma: no cover - types only
    from melissa_trainer.stream.receiver import Receiver

__all__ = ["StreamSourceRecord"]


class StreamSourceRecord(Source):
    """The checkpoint record of `StreamSource` (which sets the attributes declared here)."""

    #: this rank's receiver (None before `start`)
    _receiver: Receiver | None
    #: the record loaded before `start` (None: none)
    _state: dict[str, Any] | None

    def state_dict(self) -> dict[str, Any]:
        if self._receiver is None:
            return dict(self._state or {})
        return self._receiver.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the dedup record of `state_dict()` (before `start`)."""
        if self._receiver is not None:
            raise RuntimeError("load_state_dict() must be called before start()")
        if state and not isinstance(state.get("simulations"), dict):
            raise ValueError("not a StreamSource state (no 'simulations' record)")
        if state and "launcher" in state:
            raise ValueError(
                "this checkpoint holds a study (its launcher's record, key 'launcher'): "
                "resume it with Study(launcher, StreamSource(...)), not a StreamSource alone"
            )
        self._state = dict(state) if state else None

    def reshard_state(
        self,
        states: Sequence[dict[str, Any]],
        buffer_puts: Sequence[int],
        rank: int,
        world_size: int,
        buffer_put: int,
    ) -> dict[str, Any]:
        """The receivers' records of k old ranks merged and re-split over the new ranks
        by each simulation's routing (see `melissa_trainer.stream.reshard`; `Source.reshard_state`
        for the arguments). Pure: no receiver is touched.

        Raises:
            ValueError: a record holds a launcher's (a study's: resume it with `Study`),
                or one `melissa_trainer.stream.reshard` refuses (it says why).
        """
        if any(state and "launcher" in state for state in states):
            raise ValueError(
                "this checkpoint holds a study (its launcher's record, key 'launcher'): "
                "resume it with Study(launcher, StreamSource(...)), not a StreamSource alone"
            )
        return reshard_states(states, buffer_puts, rank, world_size, buffer_put)
