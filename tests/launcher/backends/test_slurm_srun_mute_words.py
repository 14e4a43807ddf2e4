"""What a stop's warning says when the Slurm controller answers but the steps' daemons
(slurmstepd) did not answer their scancel --signal=TERM (`step_stop.Stopped.mute`), in
an allocation of several nodes: the steps whose tasks ran on other nodes only are named
and said to be out of reach, ending when Slurm's kill reaches them or with their node.
Failed before: the warning said "on this node, 0 task process(es) got SIGTERM" and
nothing of the tasks elsewhere (the two-node cluster's vanished-node stop,
test_slurm_srun_two_nodes.py, prints these words). Stand-ins: no Slurm, no /proc scan
(`step_tasks`, `end_tasks` replaced), an srun backend that only records its kill."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.backends.slurm import step_stop
from melissa_trainer.launcher.backends.slurm.step_stop import Stopped


class _Local:
    """Stands in for the sruns' LocalBackend: `kill_all` records what it was given."""

    def __init__(self) -> None:
        self.killed: list[Any] = []

    def kill_all(self, processes: list[Any], grace: float) -> None:
        self.killed.extend(processes)


def _mute_stop(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> str:
    """A mute stop of steps s3 (a task here, pid 11) and s4 (none here); its warning."""
    here = {3: [11]}
    monkeypatch.setattr(
        step_stop,
        "step_tasks",
        lambda allocation, ids, names=(): [p for i in ids for p in here.get(i, [])],
    )
    monkeypatch.setattr(step_stop, "end_tasks", lambda allocation, ids, grace, names=(): ([11], []))
    steps = [
        SimpleNamespace(step_name="s3", step_id=3, process="srun3"),
        SimpleNamespace(step_name="s4", step_id=4, process="srun4"),
    ]
    local = _Local()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
        step_stop._end_here(local, "7", steps, steps, [], 2.0, Stopped(away=False, mute=True))  # type: ignore[arg-type]
    assert local.killed == ["srun3", "srun4"]
    return one_line(caplog.text)


@pytest.mark.timeout(10)
def test_a_mute_stop_on_two_nodes_names_the_steps_whose_tasks_are_elsewhere(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    said = _mute_stop(monkeypatch, caplog)
    assert "on this node, 1 task process(es) got SIGTERM" in said, said
    assert "steps ['s4'] had no task on this node" in said, said
    assert "other nodes (SLURM_JOB_NUM_NODES=2) could not be reached" in said, said
    assert "when Slurm's kill reaches them (the cancel by name) or with their node" in said


@pytest.mark.timeout(10)
def test_a_mute_stop_on_one_node_says_no_task_runs_elsewhere(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    said = _mute_stop(monkeypatch, caplog)
    assert "(SLURM_JOB_NUM_NODES=1): no task runs elsewhere" in said, said
    assert "could not be reached" not in said, said
