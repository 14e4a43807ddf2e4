"""A stop whose `Backend.kill_all` fails still records its jobs and closes the backend.

`Supervisor.shutdown` kills every job in one `kill_all` call (one grace for them all).
Before, a failure inside it (a backend's error, an interrupt) left every job in the
study record as "running" (none was recorded interrupted, though the kill had begun
on all of them: a resumed study counts none of them pending, and the summary counts
dead processes as running) and never called `Backend.close`, which kills what the
failed call left. Killed one after another (the stop before), the jobs already killed
were recorded. Now every job of the failed call is recorded interrupted (pending: run
again on resume, as a killed one is), the backend is closed, and the error is raised."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from melissa_trainer.launcher import LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.base import Backend, Handle, Job
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor


@dataclass(eq=False)
class _Handle(Handle):
    job: Job


class FailingKill(Backend):
    """Jobs that never end; `kill_all` fails (after its signals, say); `close` counted."""

    name = "failing-kill"

    def __init__(self) -> None:
        self.closed = 0

    def launch(self, job: Job) -> Handle:
        return _Handle(job)

    def poll(self, handle: Handle) -> int | None:
        return None

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        return None

    def kill_all(
        self, handles: Sequence[Handle], grace: float = 5.0, reasons: Sequence[str] | None = None
    ) -> list[int | None]:
        raise OSError("the kill failed half-way")

    def close(self) -> None:
        self.closed += 1


def started(tmp_path: Path, backend: Backend, n: int) -> tuple[StudyRecord, Supervisor]:
    """A study of `n` simulations, all started on `backend` (one tick)."""
    policy: dict = dict(max_restarts=1, on_failure="redraw", max_redraws=3, first_simulation_id=0)
    study = StudyRecord(UniformSampler({"x": (0.0, 1.0)}, seed=0), n, **policy)
    settings = Settings(
        job_limit=n, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    supervisor = Supervisor(
        settings, study, threading.Lock(), backend, lambda s, p: ["sim"], None, None
    )
    supervisor.tick()
    return study, supervisor


@pytest.mark.timeout(60)
def test_a_failed_kill_all_records_every_job_interrupted_and_closes_the_backend(
    tmp_path: Path,
) -> None:
    backend = FailingKill()
    study, supervisor = started(tmp_path, backend, 3)
    assert study.counts()["running"] == 3
    with pytest.raises(OSError, match="half-way"):
        supervisor.shutdown()
    assert study.counts()["running"] == 0
    assert study.counts()["pending"] == 3
    assert not supervisor.jobs
    assert backend.closed == 1


class FailingClose(FailingKill):
    """`kill_all` fails, and then `close` too."""

    def close(self) -> None:
        self.closed += 1
        raise RuntimeError("the close failed as well")


@pytest.mark.timeout(60)
def test_a_close_that_fails_after_the_kill_is_logged_and_the_kills_error_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, the close's error was raised in place of the kill's (the first cause
    left only as its context): a user read "the close failed" for a kill that had."""
    backend = FailingClose()
    study, supervisor = started(tmp_path, backend, 2)
    with (
        caplog.at_level("ERROR", logger="melissa_trainer.launcher"),
        pytest.raises(OSError, match="half-way"),
    ):
        supervisor.shutdown()
    assert backend.closed == 1
    assert study.counts()["pending"] == 2
    said = [r for r in caplog.records if "close failed too" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is not None, caplog.text
    assert "the close failed as well" in caplog.text
