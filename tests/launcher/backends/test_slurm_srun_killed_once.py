"""A stop with the Slurm controller away counts each task process it SIGKILLed once: a
task SIGKILLed after the grace (`step_tasks.end_tasks`) but not yet gone when the steps
are cancelled (a process in uninterruptible I/O past `step_tasks.GONE_WAIT`) is found and
SIGKILLed again by `SrunSteps._cancel_unless_away`. Failed before: the warning said
"2 SIGKILLed" of one process. Stand-ins: no Slurm, no /proc scan (`kill_tasks`)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.backends.slurm import steps
from melissa_trainer.launcher.backends.slurm.step_stop import Stopped


@pytest.mark.timeout(10)
def test_a_task_sigkilled_twice_is_counted_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    asked: list[tuple[str, set[int], set[str]]] = []

    def still_there(allocation: str, ids: set[int], names: set[str]) -> list[int]:
        asked.append((allocation, set(ids), set(names)))
        return [12]  # (SIGKILLed by end_tasks, not yet gone)

    monkeypatch.setattr(steps, "kill_tasks", still_there)
    srun_steps = object.__new__(steps.SrunSteps)
    srun_steps._allocation = "7"
    step = SimpleNamespace(step_name="mt-sim", step_id=3)
    stopped = Stopped(away=True, termed=[11, 12], killed=[12])
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
        srun_steps._cancel_unless_away([step], None, stopped)  # type: ignore[list-item]
    assert asked == [("7", {3}, {"mt-sim"})]
    said = one_line(caplog.text)  # (the WARNING is cut at 100 columns)
    assert "2 task process(es) got SIGTERM and the grace, 1 SIGKILLed" in said, said
