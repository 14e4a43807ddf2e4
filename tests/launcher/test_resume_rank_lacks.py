"""A resumed study runs again a simulation that one rank's checkpoint lacks, even when
rank 0's receiver has all its data (hhang, stop 65: the 2-rank resume of
tests/checkpoint/test_preemption_heat.py hung about once in 40 cases).

At the SIGTERM rank 1's receiver lagged: the checkpoint had simulation 3 finished on
rank 0 and nothing of it on rank 1. `reconcile` (complete on every rank: 0-2) queued 3
to run again, but the supervisor's first look at rank 0's report, which starts with the
checkpoint's finished ids, took 3 for complete and finished it without running it: rank
1 never got its data and its stream never ended. Now the report's entries restored from
the checkpoint are not applied again (reconcile decided them), and a run-again whose
data rank 0 already had (its messages are duplicates there: no second report) counts
as complete when it exits 0, its client having closed on every rank."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.launcher import LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.base import Backend, Handle, Job
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor


@dataclass(eq=False)
class _Handle(Handle):
    job: Job


class Exits(Backend):
    """Jobs that end with exit 0 at their first poll; the names launched are kept."""

    name = "exits"

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, job: Job) -> Handle:
        self.launched.append(job.name)
        return _Handle(job)

    def poll(self, handle: Handle) -> int | None:
        return 0

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class RankZero:
    """Rank 0's receiver's report: the ids in `complete`, in order, from `start`."""

    def __init__(self, complete: list[int]) -> None:
        self.complete = complete

    def completed(self, start: int = 0) -> list[int]:
        return self.complete[start:]

    def refused(self, start: int = 0) -> list[tuple[int, str]]:
        return []

    def idle_seconds(self) -> float:
        return 10.0  # (idle: an exited simulation's missing data would be judged lost)

    def backpressured(self) -> bool:
        return False

    def describe(self, simulation_id: int) -> str:
        return "rank 0's receiver has all its steps"

    def first_message_at(self, simulation_id: int) -> float | None:
        return None

    def client_of(self, simulation_id: int) -> str | None:
        return None


def test_a_simulation_one_rank_lacks_runs_again_and_finishes(tmp_path: Path) -> None:
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0), 4, max_restarts=0, on_failure="abandon",
        max_redraws=0, first_simulation_id=0,
    )  # fmt: skip
    study.data_reported = True
    settings = Settings(
        job_limit=4, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    # the first run: all four ran and exited 0; rank 0 had the data of every one
    first = Exits()
    report = RankZero([])
    supervisor = Supervisor(settings, study, threading.Lock(), first, lambda s, p: ["sim"], None,
                            None, data=report)  # fmt: skip
    supervisor.tick()  # launched
    supervisor.tick()  # exited
    report.complete.extend([0, 1, 2, 3])
    supervisor.tick()
    assert study.counts()["finished"] == 4
    # the resume: complete on every rank 0-2 (rank 1 lacks 3): 3 runs again
    assert study.reconcile({0, 1, 2}) == [3]
    assert study.records[3].status == "pending"
    again = Exits()
    resumed = Supervisor(
        settings,
        study,
        threading.Lock(),
        again,
        lambda s, p: ["sim"],
        None,
        None,
        data=RankZero([0, 1, 2, 3]),
    )  # fmt: skip  (restored: 0-3)
    resumed.tick()  # 3 launched (before: finished from rank 0's restored report, not run)
    assert [name.split("-")[1] for name in again.launched] == ["3"], again.launched
    for _ in range(3):
        resumed.tick()  # it exits 0: its data was already complete on rank 0
    assert study.records[3].status == "finished", study.records[3]
    assert study.counts()["finished"] == 4 and study.counts().get("failed", 0) == 0
