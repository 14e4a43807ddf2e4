"""Rank 0's study-end thread never tells the other ranks that a study ended when its
launcher has failed (`study.end_notice.StudyEndNotice._run`).

The notice goes without `done` when nothing is alive or left to start and rank 0's
receiver has waited for room `HELD` s (`ended`'s held path, which reads the counts,
not the launcher's error). Its loop asked `ended` before `Launcher.check` at each poll,
so a study that failed between one poll's check and the next poll's `ended` (an exited
simulation refused after its exit, under ``on_failure="raise"``: its record "failed",
nothing running or pending, the others still "exited") was told to the other ranks as
ended (a STUDY_END naming the exited ones), and its failure never reached their progress
file (`ProgressFile.failed`). Failed before the fix (`told` set, no ``failed``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.study.end_notice import HELD, StudyEndNotice
from melissa_trainer.study.progress import read_progress

FAILURE = "simulation 1 failed once (refused after exit 0), with LauncherTuning.on_failure='raise'"


class HeldLauncher:
    """Rank 0's launcher with every simulation ended, two "exited" (their data held
    behind rank 0's full buffer) and one failed; `error`: the study's error, once
    stored (`check` raises it)."""

    done = False

    def __init__(self) -> None:
        self.error: str | None = None
        self.tuning = type("Tuning", (), {"poll_interval": 0.01})()

    @property
    def failed(self) -> bool:
        """As `Launcher.failed` reads a stored error."""
        return self.error is not None

    def check(self) -> None:
        if self.error is not None:
            raise LauncherError(self.error)

    def jobs_alive(self) -> int:
        return 0

    def summary(self) -> dict[str, float]:
        return {"running": 0.0, "pending": 0.0, "exited": 2.0, "failed": 1.0}

    def outcomes(self) -> list[SimulationOutcome]:
        return [
            SimulationOutcome(0, "exited", (0,), "", {}),
            SimulationOutcome(1, "failed", ("refused",), "", {}),
            SimulationOutcome(2, "exited", (0,), "", {}),
        ]

    def data_backpressured(self) -> bool:
        return True

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return None

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2


@pytest.mark.timeout(30)
def test_a_study_that_failed_as_its_held_wait_ended_is_told_failed_not_ended(
    tmp_path: Path,
) -> None:
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    launcher: Any = HeldLauncher()
    notice = StudyEndNotice(launcher, tmp_path, "run1")
    # the polls before the failure: held since HELD s ago, not long enough yet
    assert notice.ended(time.monotonic() - HELD) is None
    launcher.error = FAILURE  # (the launcher's thread failed the study since that poll)
    notice._run()  # (the thread's body; returns)
    assert not notice.told.is_set(), "a failed study was told to the other ranks as ended"
    progress = read_progress(tmp_path, "run1")
    assert progress is not None and progress["failed"].startswith(FAILURE), progress
