"""Which launch this process belongs to: the identity its stop records carry, so that a
torchrun restart acts only on the records of its own launch.

A torchrun restart (``TORCHELASTIC_RESTART_COUNT`` above 0) reads the rendezvous
directory's stop records as those of its failed attempt (`final_stop`) and rewrites
them when it fails early (`restart_failed`). The directory outlives launches: a launch
whose first attempt fails before any receiver publishes leaves the previous launch's
records there, which its restart must neither obey (a ``nonfinite`` stop of a run fixed
since) nor rewrite (a preemption's promise of a resume by hand). The run id cannot tell
them apart (each attempt's trainer has its own), nor can ``TORCHELASTIC_RUN_ID``
(torchrun's default is ``none``, every launch alike).

So each torchrun launch has an id (`this_launch`: set by the trainer from the
launcher's store, `trainer.launch_join`, which is new for each launch and outlives its
restarts), written into every stop record as ``launch`` (`stop_record.build_record`),
and a restart acts on a record only when `is_ours` (its ``launch`` equals this
process's, both absent included: a process with no id, run without an agent store, acts
as before on records with none). A record of another launch, or one with no ``launch``
read by a process that has one, is not ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LAUNCH_FIELD", "is_ours", "note_launch", "this_launch"]

#: the stop record's field naming its launch (absent when the writer had none)
LAUNCH_FIELD = "launch"

_launch: str | None = None


def note_launch(launch: str | None) -> None:
    """This process's launch id from now on (None: none known). Called by the trainer
    before it reads or writes any record (`trainer.launch_join.join_launch`)."""
    global _launch
    _launch = launch


def this_launch() -> str | None:
    """This process's launch id, or None when it has none (no torchrun agent store)."""
    return _launch


def is_ours(record: Mapping[str, Any]) -> bool:
    """Whether the stop record `record` (its JSON object) was written by this launch: its
    ``launch`` equals `this_launch` (absent on both sides counts as equal)."""
    return record.get(LAUNCH_FIELD) == _launch
