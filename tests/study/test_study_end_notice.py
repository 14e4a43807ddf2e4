"""When rank 0 sends the STUDY_END (`study.end_notice.StudyEndNotice.ended`).

The gap: with a rate-limited buffer (the default reservoir) rank 0 draws nothing while
it waits for a rank that lacks data, so its receiver waits for room and its last
simulations stay "exited" (exit 0, data not all in): the launcher is never `done`, and
the notice, which waited for `done`, never went (the lacking rank waited for its stall
timeout). Now it also goes when no job is alive, nothing is left to start and rank 0's
receiver has waited for room for `HELD` seconds; never while a job runs, a restart or a
draw is due, or rank 0's receiver is idle (the launcher then judges the exited ones
itself). `ended` takes the time, so the held condition is tested without waiting.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from data_reports import Held
from waiting import wait_until

from melissa_trainer import Launcher, LauncherTuning
from melissa_trainer.launcher import LocalBackend
from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.study.end_notice import HELD, StudyEndNotice


def exited_study(tmp_path: Path, data: Held) -> Launcher:
    """A real launcher, started, whose 3 solvers exit 0 at once: "exited" (their data not
    in on rank 0), nothing left to start (`wait_exited`). Stop it."""
    launcher = Launcher(
        [sys.executable, "-c", "pass"],
        [{"a": float(i)} for i in range(3)],
        3,
        job_limit=3,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.02, max_restarts=0),
    )
    launcher.start(tmp_path / "rendezvous", data=data, study_dir=tmp_path)
    return launcher


def wait_exited(launcher: Launcher) -> None:
    wait_until(
        lambda: launcher.summary()["exited"] == 3 and launcher.jobs_alive() == 0,
        lambda: f"three simulations exited: {launcher.summary()}",
        30.0,
    )


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_all_exited_with_data_held_on_rank_0_sends_their_ids(tmp_path: Path) -> None:
    launcher = exited_study(tmp_path, Held())
    try:
        wait_exited(launcher)
        assert not launcher.done  # (what the notice waited for before, in vain)
        notice = StudyEndNotice(launcher, tmp_path / "rendezvous")
        assert notice.ended(100.0) is None  # held since now: not yet
        assert notice.ended(100.0 + HELD / 2) is None
        assert notice.ended(100.0 + HELD) == [0, 1, 2]  # exit 0
        assert notice.held
    finally:
        launcher.stop()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_all_exited_with_rank_0_idle_is_left_to_the_launcher(tmp_path: Path) -> None:
    """Rank 0's receiver does not wait for room: its data may be lost, the launcher will
    judge the exited ones (and may run them again): no notice, however long."""
    launcher = exited_study(tmp_path, Held(backpressured=False))
    try:
        wait_exited(launcher)
        notice = StudyEndNotice(launcher, tmp_path / "rendezvous")
        assert [notice.ended(100.0 + i * HELD) for i in range(4)] == [None] * 4
    finally:
        launcher.stop()


class States:
    """A launcher as the notice reads it, its state set by the test."""

    def __init__(self) -> None:
        self.done, self.alive, self.backpressured = False, 0, True
        self.failed = False  # (`Launcher.failed`: a failed study is never told ended)
        self.counts = {"running": 0, "pending": 0, "exited": 1}
        self.records = [SimulationOutcome(0, "finished", [0], "", {}),
                        SimulationOutcome(1, "exited", [0], "", {}),
                        SimulationOutcome(2, "abandoned", [1], "", {})]  # fmt: skip

    def jobs_alive(self) -> int:
        return self.alive

    def summary(self) -> dict[str, float]:
        return dict(self.counts)

    def data_backpressured(self) -> bool:
        return self.backpressured

    def outcomes(self) -> list[SimulationOutcome]:
        return self.records


def notice_of(states: States) -> StudyEndNotice:
    launcher: Any = states  # (what `ended` reads of a `Launcher`)
    return StudyEndNotice(launcher, Path("unused"))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"alive": 1}, "a job runs"),
        ({"counts": {"running": 1, "pending": 0, "exited": 1}}, "a simulation runs"),
        ({"counts": {"running": 0, "pending": 1, "exited": 1}}, "a restart is due"),
        ({"counts": {"running": 0, "pending": 0, "exited": 0}}, "nothing is held"),
        ({"backpressured": False}, "rank 0 is not held back"),
        ({"failed": True}, "the study failed (test_end_notice_failed_held.py)"),
    ],
)
def test_not_sent_while(change: dict[str, Any], why: str) -> None:
    states = States()
    vars(states).update(change)
    notice = notice_of(states)
    assert [notice.ended(i * HELD) for i in range(3)] == [None] * 3, why


def test_sent_at_once_when_done_listing_exit_0_only() -> None:
    states = States()
    states.done = True
    states.records[1] = states.records[1]._replace(status="finished")
    assert notice_of(states).ended(0.0) == [0, 1]  # (not the abandoned one)


def test_the_held_time_starts_again_when_rank_0_takes_data_in() -> None:
    states = States()
    notice = notice_of(states)
    assert notice.ended(0.0) is None
    states.backpressured = False  # (a moment of room: it may judge them now)
    assert notice.ended(HELD / 2) is None
    states.backpressured = True
    assert notice.ended(HELD) is None  # held since HELD, not since 0
    assert notice.ended(2 * HELD) == [0, 1]
    assert notice.held
