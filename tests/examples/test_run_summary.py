"""The examples' JSON summary (examples/study_report.py `run_summary`) says a figure only
where it was measured: after a resume the launcher's simulation time spans both runs,
so "sequential_seconds" (simulating first, then training) is not this run's figure and
is None, as the printed line says ("overlap: not measured for a run resumed from ...").
A user trial read 1.49 s in a resumed run's JSON against 3.04 s in the first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from study_report import run_summary

pytestmark = pytest.mark.timeout(60)


def summary(resumed_from: str | None) -> dict[str, Any]:
    trainer = SimpleNamespace(
        state=SimpleNamespace(total_samples_seen=80, global_step=10, log_history=[])
    )
    launcher = SimpleNamespace(summary=lambda: {"simulation_seconds": 6.0, "finished": 8})
    return run_summary(trainer, launcher, 1.5, 4.0, 2, resumed_from=resumed_from)  # type: ignore[arg-type]


def test_a_fresh_run_says_how_long_one_after_the_other_would_take() -> None:
    assert summary(None)["sequential_seconds"] == 6.0 / 2 + 1.5


def test_a_resumed_run_does_not() -> None:
    got = summary("/out/checkpoints/checkpoint-40")
    assert got["sequential_seconds"] is None
    assert got["simulation_seconds"] == 6.0  # (the launcher's, spanning both runs: said)
    assert got["resumed_from"] == "/out/checkpoints/checkpoint-40"
