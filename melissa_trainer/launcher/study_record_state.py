"""The checkpoint of a study's record (`StudyRecordState`, the base of `StudyRecord`):
what it saves, how a resume loads it (read once, checked, applied), reconciles it with
what every receiver's checkpoint holds, and cancels what lies past a smaller study's
end. And what both halves keep consistent: every status change goes through `_move`
(the `StatusIndex`), and the losses noted for an adaptive sampler reach it
(`apply_observations`) before its state is saved.

Not thread-safe, as `StudyRecord`: the launcher serializes every call with its lock.
What runs twice after a restart: the simulations that were running, or whose data the
receivers' checkpoints lack (`reconcile`); nothing else.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from melissa_trainer.common.migrations import CURRENT
from melissa_trainer.launcher.draw_log import DrawLog
from melissa_trainer.launcher.pending_losses import PendingLosses
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.simulation_record import (
    SavedStudy,
    SimulationRecord,
    columns,
    read_saved,
)
from melissa_trainer.launcher.status_index import StatusIndex
from melissa_trainer.launcher.study_change import past_the_end, settings_of

__all__ = ["ACTIVE", "ALIVE", "STATE_VERSION", "StudyRecordState", "resumed_status"]

#: 3: the records as columns (one list per attribute: 10^5 simulations save and load
#: in a fraction of a second, where one JSON object each took seconds); 2: the states
#: "complete" and "exited" (version 1 recorded "finished" on exit 0). The migrations of
#: earlier versions: `common.migrations` ("launcher").
STATE_VERSION = CURRENT["launcher"]
#: the statuses that count towards the study's goal (all but failed)
ACTIVE = ("pending", "running", "complete", "exited", "finished", "abandoned")
ALIVE = ("running", "complete")  # a process exists


def resumed_status(saved: str, complete: bool) -> str:
    """The status of a simulation saved as `saved` once a resume has loaded it
    (`load_saved`: alive, it is pending again) and reconciled it (`reconcile`), its data
    `complete` in every receiver's checkpoint or not: complete, a pending or exited one
    is finished; incomplete, an exited or finished one is pending (it runs again). The
    one rule of both: the stop's account of a checkpoint (`account.stop_resume_lines`)
    applies it too, so that its words and the resume's agree."""
    status = "pending" if saved in ALIVE else saved
    if complete and status in ("pending", "exited"):
        return "finished"
    if not complete and status in ("exited", "finished"):
        return "pending"
    return status


class StudyRecordState:
    """The checkpoint half of `StudyRecord` (module docstring); `StudyRecord.__init__`
    sets the attributes."""

    sampler: Sampler
    n_simulations: int
    records: dict[int, SimulationRecord]
    queue: deque[int]
    next_id: int
    redraws: int
    not_replaced: int
    not_replaced_ids: set[int]
    _index: StatusIndex
    _losses: PendingLosses
    #: the study's record of its draws (`Launcher.start` opens it); None: not written
    draw_log: DrawLog | None = None
    #: its rows while it is not open: those the loaded checkpoint counted (None: a
    #: state saved before it did, or none loaded), those written once it is closed
    draw_rows: int | None = None

    def apply_observations(self) -> None:
        """Give the adaptive sampler the losses `observe` noted since the last call, in
        the order they were noted (a no-op for a fixed design); each is a ``loss`` row
        of the `draw_log`."""
        applied = self._losses.apply(self.sampler, self.records)
        if applied and self.draw_log is not None:
            self.draw_log.observed(applied)

    def given_up(self, sid: int, how: str) -> None:
        """Tell the sampler that `sid` was given up for good (`Sampler.failed`), and
        write its ``redrawn`` or ``abandoned`` row (`how`) in the `draw_log`."""
        self.sampler.failed(sid, dict(self.records[sid].parameters))
        if self.draw_log is not None:
            self.draw_log.gave_up(sid, how)

    def close_draw_log(self) -> None:
        """Close the `draw_log` (no row is written after; its held losses' are, as it
        closes), its rows kept for `state_dict`."""
        if self.draw_log is not None:
            self.draw_log.close()  # (first: it writes the held losses' rows)
            self.draw_rows = self.draw_log.rows
            self.draw_log = None

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable; the records as columns in id order (see `STATE_VERSION`;
        `records_of` reads any version back as one object per simulation). The losses
        `observe` noted are applied first: the sampler's state holds them. With them,
        the rows of the `draw_log` written by now (``draw_rows``: every row of the
        timeline this state saves, none of a later one; a resume cuts the file there)."""
        self.apply_observations()
        rows = self.draw_log.rows if self.draw_log is not None else self.draw_rows
        return {
            "version": STATE_VERSION,
            "sampler": self.sampler.state_dict(),
            "next_id": self.next_id,
            "simulations": columns(self.records, self.sampler.names),
            "redraws": self.redraws,
            "not_replaced": self.not_replaced,  # (a resume keeps their places: load_saved)
            "not_replaced_ids": sorted(self.not_replaced_ids),  # (the account names them)
            "settings": settings_of(self.sampler, self.n_simulations),  # study_change's
            **({} if rows is None else {"draw_rows": rows}),  # (None: not counted)
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore; simulations that were running (or complete) are queued to run again;
        exited and finished ones stay so until `reconcile` says which data is complete.

        Raises:
            ValueError: an unknown version, or records that do not fit this sampler.
        """
        self.load_saved(read_saved(state, self.sampler.names))

    def load_saved(self, saved: SavedStudy) -> None:
        """`load_state_dict` of a state already read (`read_saved`: a resume reads it
        once, checks it, then applies it here); its records become this study's.

        Raises:
            ValueError: the sampler refuses its state.
            RuntimeError: `saved` was applied already (its records are a study's now).
        """
        if saved.applied:
            raise RuntimeError("this launcher state was applied already: read it again")
        self.sampler.load_state_dict(saved.sampler)
        saved.applied = True
        self._losses.clear()  # losses of the records replaced
        self.records, self.next_id, self.redraws = saved.records, saved.next_id, saved.redraws
        # (a failure that failed the study keeps its place unreplaced, as its policy
        # said, on resume too: a resumed study draws what the uninterrupted one would
        # have, never past max_redraws; a state saved before the field: 0, as before)
        self.not_replaced, self.not_replaced_ids = saved.not_replaced, set(saved.not_replaced_ids)
        self.draw_rows = saved.draw_rows  # (`Launcher.start` cuts draws.csv there)
        for record in self.records.values():
            if record.status in ALIVE:  # interrupted: run it again (not a failure)
                record.status = "pending"
        self._index.rebuild(self.records)
        self.queue = deque(sorted(self._index.ids("pending")))

    def reconcile(self, complete: Iterable[int]) -> list[int]:
        """After `load_state_dict`: `complete` are the ids whose data every receiver has
        (from their checkpointed records). Those become finished; every other exited or
        finished simulation is queued to run again. Returns the ids queued again."""
        complete = set(complete)
        rerun = []
        requeued = False
        for sid, record in self.records.items():
            status = record.status
            now = resumed_status(status, sid in complete)
            if now == status:
                continue
            requeued |= status == "pending"  # (pending -> finished: left the queue)
            self._move(sid, now)
            if now == "pending":
                rerun.append(sid)
        if requeued:  # some queued ones are finished after all
            self.queue = deque(sid for sid in self.queue if self.records[sid].status == "pending")
        self.queue = deque(sorted([*self.queue, *rerun]))
        return sorted(rerun)

    def cancel_past_the_end(self) -> list[int]:
        """A resumed study with fewer simulations than its record (`study_change`):
        cancel the pending ones past the new end (forgotten: not launched, not counted
        as failed, their ids not reused). Returns their ids; none in a study that fits."""
        pending = sorted(self._index.ids("pending"))
        counted = self._index.count(*ACTIVE) - len(pending)
        _, cancelled = past_the_end(pending, counted, self.n_simulations)
        for sid in cancelled:
            self._index.forget(sid, self.records.pop(sid))
        self._losses.discard(cancelled)  # (noted since the load: no record to observe)
        if cancelled:
            self.queue = deque(sid for sid in self.queue if sid in self.records)
        return cancelled

    def _move(self, sid: int, status: str) -> None:
        """Set the status of `sid` (drawn), keeping the index by status."""
        self._index.move(sid, self.records[sid], status)
