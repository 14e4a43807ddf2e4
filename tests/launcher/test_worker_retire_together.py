"""Worker mode: the workers still alive `EXIT_GRACE` s after the study ended are killed
together (`Backend.kill_all`: one `kill_grace` for them all), as a stop's jobs are.

Before, `WorkerSupervisor.retire` killed one worker after another, each given its
whole grace: N workers that ignore SIGTERM held the launcher N x `kill_grace` s (64 at
the default 5 s: 320 s), what 0ae9b978 ended for a stop. The oracle is what the
backend is asked: one `kill_all` naming every worker, no `kill`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_study_record import Silent, make

from melissa_trainer.launcher import LauncherTuning
from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.worker_mode import EXIT_GRACE, WorkerSupervisor


class Asked(Silent):
    """Workers that never end; what their kills were asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[str]]] = []

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> None:
        self.asked.append(("kill", [handle.job.name]))

    def kill_all(
        self, handles: Sequence[Handle], grace: float = 5.0, reasons: Sequence[str] | None = None
    ) -> list[int | None]:
        self.asked.append(("kill_all", [handle.job.name for handle in handles]))
        return [None] * len(handles)


@pytest.mark.timeout(60)
def test_workers_alive_after_the_study_are_killed_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = make(10, max_restarts=0, on_failure="abandon")
    settings = Settings(
        job_limit=3, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    backend = Asked()
    supervisor = WorkerSupervisor(
        settings, study, threading.Lock(), backend, lambda s, p: ["sim"], None, None,
        argv=["worker"],
    )  # fmt: skip
    try:
        supervisor.launch_jobs(0.0)
        assert sorted(supervisor.jobs) == ["worker-0", "worker-1", "worker-2"]
        monkeypatch.setattr(StudyRecord, "done", property(lambda self: True))
        supervisor.retire(0.0)  # the study's end seen
        assert backend.asked == []
        supervisor.retire(EXIT_GRACE + 1.0)
        assert backend.asked == [("kill_all", ["worker-0", "worker-1", "worker-2"])]
        assert not supervisor.jobs
    finally:
        supervisor.close_socket()
