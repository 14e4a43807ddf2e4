"""What a run resumed from this run's latest checkpoint will do with the study's
simulations, said at the stop (`SavedAccount`), in the resume's own words.

Rank 0's launcher counts a simulation finished once rank 0's receiver has all its data;
with several training ranks another rank may still lack some of its steps when a
checkpoint is written (its receiver behind, a SIGTERM). The resume runs such a
simulation again (`StudyRecord.reconcile` takes the simulations complete on every
rank's checkpointed receiver), and the stop's account, from rank 0's records alone,
promised it done (a user trial on 2 ranks: "15 simulations ended" at the stop, "14 done
(0-13); 1 run again (14)" at the resume). So:

* `taken` (every rank, as `Study.state_dict` writes the checkpoint): the receiver's
  record as written;
* `saved` (every rank once the checkpoint is in place, at the hooks' `on_save`: a
  collective, one small all-gather): each rank computes what its checkpointed receiver
  will report complete at a resume (`checkpoint_complete`: the resume's own computation,
  with the buffer's put count as that checkpoint holds it), rank 0 intersects them, as
  the resume does, and words what the resume will do (`account.stop_resume_lines`,
  from the launcher's records as the same checkpoint holds them);
* `lines` (rank 0, at the stop): those words, logged (INFO); none when no checkpoint
  of this run was written after the launcher started, or when that resume would have
  nothing to do (the study ended); when a rank could not tell, a line says so (it
  never guesses). They hold for a resume on as many ranks and simulations.

A rank that fails to compute its set still takes part in the all-gather (it sends
None), so that no rank waits in a collective another skipped. The all-gather is watched
(`saved`'s `watch`: the trainer's `StopSync.watch`): a rank held there by a stopped or
hung one warns, naming the checkpoint, instead of waiting silently until the process
group's timeout.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from melissa_trainer.buffers import META_FILE
from melissa_trainer.checkpoint.paths import rank_path
from melissa_trainer.core.wait_words import CHECKPOINT_USUAL
from melissa_trainer.launcher.account import SimulationOutcome, stop_resume_lines
from melissa_trainer.stream.ingest_state import IngestState

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.wait_watch import WaitWatch

__all__ = ["SavedAccount", "checkpoint_complete", "gather"]

logger = logging.getLogger(__name__)


def checkpoint_complete(record: Mapping[str, Any], buffer_put: int) -> list[int]:
    """The ids a receiver resumed from `record` (its checkpointed state) reports complete,
    its buffer restored with `buffer_put` puts: the resume's own computation
    (`IngestState.load_state_dict`, which forgets the samples recorded after the
    buffer's snapshot) on a fresh ingest.

    Raises:
        ValueError, KeyError: `record` is not a receiver's record of this version.
    """
    recent = len(base64.b64decode(record["recent"], validate=True)) // 16  # (u64 pairs)
    ingest = IngestState(
        int(record["rank"]),
        int(record["world_size"]),
        put=lambda sample: True,
        end=lambda reason: None,
        expected=None,
        max_field_bytes=1,
        max_pending=1,
        max_pending_bytes=1,
        max_time_step=1,
        recent_size=max(1, recent),  # (every key the record kept: none dropped)
    )
    ingest.load_state_dict(json.loads(json.dumps(record)), buffer_put)  # (as `Receiver`)
    return list(ingest.finished_ids)


def gather(
    mine: list[int] | None, watch: WaitWatch | None = None, at: str = "a checkpoint"
) -> list[list[int] | None]:
    """Every rank's `mine`, in rank order (a collective when a process group of more
    than one rank is up: all ranks call it), inside `watch`'s wait when given (`at`
    names the checkpoint in its warning)."""
    import torch.distributed as dist  # the trainer's process group, if any

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [mine]
    gathered: list[Any] = [None] * dist.get_world_size()
    if watch is None:
        dist.all_gather_object(gathered, mine)
        return gathered
    what = f"the other ranks at {at}'s on_save (the study's account of it: an all-gather)"
    with watch.waiting(what, CHECKPOINT_USUAL):
        dist.all_gather_object(gathered, mine)
    return gathered


class SavedAccount:
    """The stop's words on the latest checkpoint's resume (module docstring). Training
    thread only."""

    def __init__(self) -> None:
        self._record: Mapping[str, Any] | None = None  # (`taken`)
        self._lines: list[str] = []

    def taken(self, record: Mapping[str, Any]) -> None:
        """Every rank: `record` is the receiver's record the checkpoint being written holds."""
        self._record = record

    def saved(
        self,
        checkpoint: Path,
        rank: int,
        saved: Sequence[SimulationOutcome] | None,
        n_simulations: int,
        watch: WaitWatch | None = None,
    ) -> None:
        """Every rank, once `checkpoint` is in place (collective): rank 0, whose
        launcher's records that checkpoint holds as `saved` (None: it holds none, the
        launcher had not started), words what a run resumed from it will do. `watch`
        (the trainer's `StopSync.watch`) watches the all-gather: give it on every rank."""
        mine = self.complete_here(checkpoint, rank)
        sets = gather(mine, watch, checkpoint.name)  # (every rank: none waits alone)
        if rank == 0:
            self.said(sets, saved, n_simulations, checkpoint)

    def complete_here(self, checkpoint: Path, rank: int) -> list[int] | None:
        """The ids this rank's receiver, resumed from `checkpoint`, will report complete
        (the record `taken`, the buffer's put count from the checkpoint's file); [] for
        an empty record (a receiver not started); None, with a WARNING, if it cannot
        tell."""
        record, self._record = self._record, None
        if not record:
            return None if record is None else []
        try:
            meta = json.loads((rank_path(checkpoint, rank) / META_FILE).read_text())
            return checkpoint_complete(record, int(meta["put"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:  # said, not guessed
            logger.warning(
                "rank %d cannot tell which simulations %s holds complete (%s): the stop's "
                "account will not say what a resume from it runs again",
                rank,
                checkpoint,
                exc,
            )
            return None

    def said(
        self,
        sets: Sequence[list[int] | None],
        saved: Sequence[SimulationOutcome] | None,
        n_simulations: int,
        checkpoint: Path,
    ) -> None:
        """Rank 0: the words on a resume from `checkpoint`, from every rank's
        `complete_here` (`sets`, in rank order) and the launcher's records `saved`
        there (None: no words)."""
        if saved is None:
            self._lines = []
        elif any(s is None for s in sets):
            self._lines = [
                f"a run resumed from {checkpoint} runs again the simulations whose data "
                f"a rank's checkpoint lacks (a rank could not tell which: see its warning)"
            ]
        else:
            complete = set.intersection(*(set(s or ()) for s in sets))
            self._lines = stop_resume_lines(saved, complete, n_simulations, str(checkpoint))

    def lines(self) -> list[str]:
        """Rank 0, at the stop: the words on the latest checkpoint's resume, logged
        (INFO), once; none when `saved` made none."""
        lines, self._lines = self._lines, []
        for line in lines:
            logger.info("%s", line)
        return lines
