"""The receivers' reports of complete data, as the supervisor applies them
(`CompletedReports`), on a fresh study and on a resumed one.

Contract: rank 0's receiver reports, in order, the ids of the simulations whose data it
has complete (`DataReport.completed`); a resumed receiver's report starts with the ids
its checkpoint holds finished. Those are not applied again: `StudyRecord.reconcile`
decided them before the supervisor started, from every rank's checkpoint (complete on
every rank: finished; else run again). Applied, they would finish a simulation that
another rank lacks without running it, and that rank's stream would never end (the
2-rank resume that hung: tests/launcher/test_resume_rank_lacks.py). A simulation run
again whose data rank 0 already had gets no second report (its messages are duplicates
there): it is complete when it exits 0 (`rerun_done`), its client having closed on
every rank (BYE). Thread-safety: the caller holds the study's lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from melissa_trainer.launcher.reports import DataReport
from melissa_trainer.launcher.study_record import StudyRecord

__all__ = ["CompletedReports"]


class CompletedReports:
    """Where the supervisor is in `data`'s report (`seen`), and the ids rank 0 had
    complete when the supervisor started that `study` runs again (`before`). Built
    before the launcher's thread starts."""

    def __init__(self, data: DataReport | None, study: StudyRecord) -> None:
        restored = list(data.completed(0)) if data is not None else []
        self.seen = len(restored)  # (decided by reconcile: not applied again)
        self.before = set(restored) & set(study.ids("pending"))

    def new(self, data: DataReport) -> list[int]:
        """The ids reported since the last call."""
        fresh = list(data.completed(self.seen))
        self.seen += len(fresh)
        return fresh

    def rerun_done(self, exited: Iterable[int]) -> list[int]:
        """Of the `exited` ids (exit 0, awaiting their data), those whose data rank 0
        had before this run: complete now (module docstring); each given once."""
        done = sorted(set(exited) & self.before)
        self.before.difference_update(done)
        return done
