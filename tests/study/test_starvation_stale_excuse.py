"""An excuse another rank reads from rank 0's progress file (``explained``,
`study.progress`) is trusted only while fresh (`EXCUSE_AGE`, by its ``written``): a
file left by an earlier run, or by a rank 0 that stopped writing long ago, no longer
excuses a starved rank's silence for ever (`study.starvation.rank0_excuse`); and rank 0
rewrites a set ``explained`` every `REFRESH` s, so that a long legitimate wait (a job
queued for an hour) stays fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from melissa_trainer.study.progress import EXCUSE_AGE, REFRESH, ProgressFile, read_progress
from melissa_trainer.study.progress_words import rank0_excuse

QUEUED = "the launcher waits for 1 job(s) queued by the scheduler (not started yet)"
NOW = 1_000_000.0


def said(age: float | None, explained: str | None = QUEUED) -> dict[str, Any]:
    """Rank 0's file, written `age` s before `NOW` (None: a file without a time)."""
    return {"explained": explained, "written": None if age is None else NOW - age}


def allowance(idle: float) -> str | None:
    """A start-up allowance of 60 s (`study.launch.other_rank_excuse`)."""
    return "starting up" if idle <= 60.0 else None


def test_a_fresh_excuse_explains_the_silence() -> None:
    words = rank0_excuse(said(2.0), 900.0, None, now=NOW)
    assert words == f"rank 0's launcher says: {QUEUED}"
    assert rank0_excuse(said(EXCUSE_AGE), 900.0, None, now=NOW) is not None
    assert rank0_excuse(said(2.0, explained=None), 900.0, allowance, now=NOW) is None


def test_a_stale_excuse_explains_nothing() -> None:
    """Before, an ``explained`` of any age excused the silence (a rank 0 stopped or
    gone, an earlier run's file: never a failure, never a deadlock said)."""
    assert rank0_excuse(said(EXCUSE_AGE + 1.0), 900.0, None, now=NOW) is None
    assert rank0_excuse(said(3600.0), 900.0, None, now=NOW) is None
    assert rank0_excuse(said(None), 900.0, None, now=NOW) is None  # (no time: no age)


def test_a_stale_file_is_a_file_not_known() -> None:
    """As no file: the start-up allowance answers, bounded by the silence's length."""
    assert rank0_excuse(said(3600.0), 30.0, allowance, now=NOW) == "starting up"
    assert rank0_excuse(said(3600.0), 90.0, allowance, now=NOW) is None
    assert rank0_excuse(None, 30.0, allowance, now=NOW) == "starting up"


class QueuedLauncher:
    """Rank 0's launcher with one job queued for ever: nothing else changes."""

    def data_backpressured(self) -> bool:
        return False

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return QUEUED

    def jobs_alive(self) -> int:
        return 1

    def summary(self) -> dict[str, float]:
        return {"running": 0.0, "pending": 3.0, "exited": 0.0, "finished": 0.0}

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2


def test_rank_0_rewrites_a_set_excuse_every_refresh(tmp_path: Path) -> None:
    """Before, a file was rewritten only at a change (or while rank 0 was held back):
    a job queued for an hour left an hour-old ``explained``, which the age bound would
    then refuse."""
    launcher: Any = QueuedLauncher()
    progress = ProgressFile(tmp_path, "run1")
    assert progress.update(launcher, now=0.0)
    first = read_progress(tmp_path, "run1")
    assert first is not None and first["explained"] == QUEUED
    assert not progress.update(launcher, now=REFRESH - 0.5)  # (nothing changed yet)
    assert progress.update(launcher, now=REFRESH + 0.1)
    second = read_progress(tmp_path, "run1")
    assert second is not None and second["written"] >= first["written"]
    assert second["explained"] == QUEUED
