"""The starvation back-pressure acts on fresh data, not on its view as of the last poll.

`ProgressFile.update` (rank 0's study-end thread, once per `poll_interval`) raises the
launcher's bound on ended simulations awaiting their data while a rank starves and rank
0's receiver waits for room (`Launcher.lift_data_bound`). Before, the supervisor took the
raise as set until the next update: a rank 0 whose training had caught up (taking data
in again) still had simulations started past `job_limit`'s bound for up to a poll (30 s
on a Slurm study). `Supervisor.data_bound` now reads the back-pressure at each launch.

The other rank's side reads its own sample counter before any verdict: a stale progress
file of rank 0 (read at most once a second, rewritten once a poll) that still says the
rank starves in a deadlock does not fail a rank whose samples came again."""

from __future__ import annotations

import threading
from pathlib import Path

from test_starved_deadlock import Ending, HeldBack

from melissa_trainer.buffers import BufferStats
from melissa_trainer.launcher import LauncherTuning, UniformSampler
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor
from melissa_trainer.stream.starvation_watch import REPORT_AFTER, StarvationWatch


class Toggled(HeldBack):
    """Rank 0's receiver, back-pressured while `held`."""

    held = True

    def backpressured(self) -> bool:
        return self.held


def test_the_raised_bound_ends_when_rank_0_takes_data_in_again(tmp_path: Path) -> None:
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0), 20, max_restarts=0, on_failure="abandon",
        max_redraws=0, first_simulation_id=0,
    )  # fmt: skip
    study.data_reported = True
    settings = Settings(
        job_limit=2, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    data = Toggled()
    supervisor = Supervisor(
        settings, study, threading.Lock(), Ending(), lambda s, p: ["sim"], None, None,
        data=data,
    )  # fmt: skip
    for _ in range(6):
        supervisor.tick()
    assert study.counts()["exited"] == 4  # (job_limit 2: 2 at a time, then held)
    supervisor.bound_lifted = True  # a rank starves while rank 0 is held back
    assert supervisor.data_bound() == 4
    data.held = False  # rank 0 caught up: it takes data in (no update since)
    assert supervisor.data_bound() == 2  # (before: 4 until the next update)
    assert supervisor.held_by_data_bound()
    for _ in range(6):
        supervisor.tick()
    assert study.counts()["exited"] == 4, study.counts()  # (before: 6 started past it)
    data.held = True  # held back again, the raise still set: it applies again
    for _ in range(6):
        supervisor.tick()
    assert study.counts()["exited"] == 6, study.counts()


def test_a_stale_deadlock_verdict_does_not_fail_a_rank_whose_samples_came_again() -> None:
    now, put, asked = [0.0], [0], [0]

    def deadlock(idle: float, wanted: int) -> str | None:
        asked[0] += 1
        return "rank 0's file, as last read, says: deadlock. "  # (stale from here on)

    watch = StarvationWatch(
        1, 2, None, lambda idle: None, lambda: "", lambda: put[0],
        lambda: BufferStats(size=1, capacity=8, put=put[0], got=0, evicted=0),
        lambda: now[0], deadlock=deadlock, report=lambda idle: None,
    )  # fmt: skip
    watch.check(4, 0.02)  # a wait begins
    for _ in range(50):  # samples come at each check, past REPORT_AFTER in all
        now[0] += REPORT_AFTER
        put[0] += 1
        watch.check(4, 0.02)
    assert asked[0] == 0  # never asked: the samples came
