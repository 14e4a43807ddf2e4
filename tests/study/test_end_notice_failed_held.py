"""The end-of-study notice never tells the other ranks that a failed study has ended.

Its second branch (`StudyEndNotice.ended`: no job alive, nothing left to start, rank 0's
receiver held back for `HELD` s) decides the study has ended without `done`. Before, it
did not read whether the study had failed: with simulations exited and held on rank 0,
one refused after its exit 0 (its last steps NaN, ``nonfinite="fail"``) and given up
for good fails the study, yet the others are still exited and held, and the notice sent
the STUDY_END ("the study has ended") where the ranks must hear the failure; and this
both in the moment the launcher's thread has judged the study failed (the thread held
there, as in tests/launcher/test_done_when_failing.py) and once its error is stored
(the notice's loop asks `ended` before `check`)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from data_reports import Held
from waiting import wait_until

from melissa_trainer import Launcher, LauncherTuning
from melissa_trainer.launcher import LocalBackend
from melissa_trainer.launcher.failure_policy import FailurePolicy
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.study.end_notice import HELD, StudyEndNotice

pytestmark = pytest.mark.e2e  # (its solvers run as processes)


class HeldThenRefused(Held):
    """Rank 0's `DataReport`: no simulation's data all in, held behind a full buffer,
    never idle; simulation 0 refused once `refuse` is set (after its exit 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = threading.Event()

    def refused(self, start: int = 0) -> list[tuple[int, str]]:
        said = [(0, "its steps 2-3 hold NaN (nonfinite='fail')")] if self.refuse.is_set() else []
        return said[start:]


def raised(launcher: Launcher) -> bool:
    """`check` raises: the study's error is stored."""
    try:
        launcher.check()
    except LauncherError:
        return True
    return False


@pytest.mark.timeout(60)
def test_a_study_failed_while_its_exited_simulations_are_held_is_not_told_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reached, release = threading.Event(), threading.Event()
    reap = FailurePolicy.reap_exited

    def held(self: FailurePolicy, when: str = "when the study failed") -> None:
        if when == "when the study failed":
            reached.set()
            release.wait(45)
        reap(self, when)

    monkeypatch.setattr(FailurePolicy, "reap_exited", held)
    data = HeldThenRefused()
    launcher = Launcher(
        [sys.executable, "-c", "pass"],
        [{"a": float(i)} for i in range(3)],
        3,
        job_limit=3,
        backend=LocalBackend(),
        tuning=LauncherTuning(
            poll_interval=0.02, max_restarts=0, on_failure="raise", systematic_failures=None
        ),
    )
    launcher.start(tmp_path / "rendezvous", data=data, study_dir=tmp_path)
    try:
        wait_until(
            lambda: launcher.summary()["exited"] == 3 and launcher.jobs_alive() == 0,
            lambda: f"three simulations exited: {launcher.summary()}",
            30.0,
        )
        notice = StudyEndNotice(launcher, tmp_path / "rendezvous")
        assert notice.ended(100.0) is None  # held since now (the condition of its branch)
        data.refuse.set()
        assert reached.wait(30), ("the study did not fail", launcher.summary())
        summary = launcher.summary()
        assert (summary["exited"], summary["running"], summary["pending"]) == (2, 0, 0), summary
        assert not launcher.done
        # judged failed, its error not stored yet
        assert notice.ended(100.0 + HELD) is None
        release.set()
        wait_until(lambda: raised(launcher), "its error stored", 30.0)
        with pytest.raises(LauncherError, match="simulation 0 failed once"):
            launcher.check()
        assert notice.ended(100.0 + 2 * HELD) is None  # its error stored
        assert not notice.held
    finally:
        release.set()
        launcher.stop()
