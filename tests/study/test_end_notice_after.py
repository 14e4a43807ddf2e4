"""After rank 0's held end-of-study notice went, its thread keeps rank 0's progress file
current (`study.end_notice`, "A failure after a held notice"): a restart that runs, and
the study's failure, reach the other ranks (`study.progress`), until `stop`.

Before, the thread returned once it had sent: a simulation refused on another rank after
the notice (its failure handed to rank 0, tests/study/test_end_notice_then_failure.py)
and run again, or failing the study, left the file as of the notice, and a rank waiting
for data read stale counts and no ``failed`` (waited for its stall timeout). Failed
before the fix: neither the restart's count nor the failure was written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.study import end_notice
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.progress import read_progress

FAILURE = "simulation 1 failed twice (refused), with LauncherTuning.on_failure='raise'"


class HeldLauncher:
    """Rank 0's launcher with both simulations "exited" (their data held behind rank 0's
    full buffer); `running`: a restart runs; `error`: the study's error (`check`)."""

    done = False

    def __init__(self) -> None:
        self.error: str | None = None
        self.running = 0
        self.tuning = type("Tuning", (), {"poll_interval": 0.01})()

    @property
    def failed(self) -> bool:
        return self.error is not None

    def check(self) -> None:
        if self.error is not None:
            raise LauncherError(self.error)

    def jobs_alive(self) -> int:
        return self.running

    def summary(self) -> dict[str, float]:
        return {"running": float(self.running), "pending": 0.0, "exited": 2.0 - self.running}

    def outcomes(self) -> list[SimulationOutcome]:
        return [SimulationOutcome(s, "exited", (0,), "", {}) for s in (0, 1)]

    def data_backpressured(self) -> bool:
        return True

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return None

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2


def progress(directory: Path) -> dict[str, Any]:
    """Rank 0's progress file as another rank reads it ({} while there is none)."""
    return read_progress(directory, "run1") or {}


@pytest.mark.timeout(60)
def test_after_the_held_notice_a_restart_then_the_failure_reach_the_progress_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(end_notice, "HELD", 0.0)  # (held at the first poll: sent at once)
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    launcher: Any = HeldLauncher()
    notice = StudyEndNotice.start(launcher, tmp_path, "run1")
    try:
        assert notice.told.wait(30), "no notice"
        assert notice.held
        launcher.running = 1  # simulation 1 runs again (refused on another rank)
        wait_until(
            lambda: progress(tmp_path).get("running") == 1, "the restart said", UNTIL_TEST_TIMEOUT
        )
        launcher.error = FAILURE  # its restart refused too: the study failed
        wait_until(lambda: progress(tmp_path).get("failed"), "the failure said", UNTIL_TEST_TIMEOUT)
        assert progress(tmp_path)["failed"].startswith(FAILURE)
        notice._thread.join(20)  # (a failure told ends the thread)
        assert not notice._thread.is_alive()
    finally:
        notice.stop()


@pytest.mark.timeout(60)
def test_after_the_notice_stop_ends_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(end_notice, "HELD", 0.0)
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    notice = StudyEndNotice.start(HeldLauncher(), tmp_path, "run1")  # type: ignore[arg-type]
    assert notice.told.wait(30), "no notice"
    notice.stop()
    notice._thread.join(20)
    assert not notice._thread.is_alive()
    assert not progress(tmp_path).get("failed")
