"""A simulation given up says what its study's failure policy did with it, in the study's
error (`reports.study_counts`) and its account (`account.study_account`): under "abandon"
it is counted abandoned, not replaced; under "redraw" it is replaced by a new draw.

Before, a 2-rank study under ``on_failure="abandon"`` (min_finished_fraction=1.0) where
one simulation exited 3 failed with "0 abandoned ... 1 pending (= 2); besides, 1 failed
for good, each replaced by a new draw": the simulation that made the study fail kept the
status "failed" (a redraw's), though nothing was, or would be, drawn in its place."""

from __future__ import annotations

from pathlib import Path

import pytest
from account_studies import launcher_of, run_until_failed

from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.launcher.reports import study_counts
from melissa_trainer.launcher.study_record import StudyRecord


def make(n: int, on_failure: str, min_finished_fraction: float) -> StudyRecord:
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0),
        n,
        max_restarts=0,
        on_failure=on_failure,
        max_redraws=n,
        min_finished_fraction=min_finished_fraction,
        first_simulation_id=0,
    )
    study.data_reported = True
    return study


def outcomes(study: StudyRecord) -> list[SimulationOutcome]:
    """As `Launcher.outcomes` builds them."""
    return [
        SimulationOutcome(sid, r.status, list(r.exit_codes), r.reason, dict(r.parameters))
        for sid, r in sorted(study.records.items())
    ]


def fail_one(study: StudyRecord) -> str:
    """Run the study's two first simulations: 0 finishes (3 samples), 1 exits 3."""
    assert study.take(0.0) == 0 and study.take(0.0) == 1
    study.process_ended(0, 1.0, 0)
    study.data_complete(0)
    return study.process_ended(1, 1.0, 3)


@pytest.mark.parametrize("fraction", [0.5, 1.0])  # 1.0: the study fails on it
def test_abandoned_is_counted_abandoned_and_not_replaced(fraction: float) -> None:
    study = make(2, "abandon", fraction)
    assert fail_one(study) == ("abandon" if fraction < 1.0 else "raise")
    assert study.records[1].status == "abandoned"
    line = study_counts(study.summary(2.0), 2, 2)
    assert line.startswith(
        "study of 2 simulations: 1 finished, 1 abandoned, 0 running, 0 exited, 0 pending (= 2)"
    ), line
    assert "besides, 0 failed for good;" in line and "replaced" not in line
    lines, _ = study_account(outcomes(study), {0: (3, 0), 1: (1, 0)}, 2)
    assert "1 given up part-way (abandoned)" in lines[1], lines


def test_redrawn_is_counted_failed_and_replaced() -> None:
    study = make(2, "redraw", 0.5)
    assert fail_one(study) == "redraw"
    assert study.records[1].status == "failed"
    line = study_counts(study.summary(2.0), 2, 2)
    assert "1 finished, 0 abandoned, 0 running, 0 exited, 1 pending (= 2)" in line
    assert "besides, 1 failed for good, replaced by a new draw;" in line
    lines, _ = study_account(outcomes(study), {0: (3, 0), 1: (1, 0)}, 2)
    assert "1 given up part-way (redrawn)" in lines[1], lines


def test_the_failure_that_fails_a_redraw_study_is_not_said_replaced() -> None:
    study = make(2, "redraw", 1.0)
    assert fail_one(study) == "raise"  # (no redraw: the study failed first)
    line = study_counts(study.summary(2.0), 2, 2)
    # it holds its place, failed (not pending: test_account_buckets.py), and is the only
    # one failed for good: no "besides"
    said = "1 finished, 0 abandoned, 1 failed (not replaced), 0 running, 0 exited, 0 pending"
    assert f"{said} (= 2); 2 attempts in all" in line, line


def test_a_part_way_account_names_each_fate() -> None:
    partway = [
        SimulationOutcome(0, "failed", (1,), "", {"x": 0.1}),
        SimulationOutcome(1, "abandoned", (1,), "", {"x": 0.2}),
        SimulationOutcome(2, "abandoned", (1,), "", {"x": 0.3}),
    ]
    lines, _ = study_account(partway, {i: (1, 0) for i in range(3)})
    assert "3 given up part-way (2 abandoned, 1 redrawn)" in lines[1], lines


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_launcher_that_abandons_says_abandoned_in_its_error(tmp_path: Path) -> None:
    code = (
        "import os, sys; sys.exit(3 if os.environ['MELISSA_TRAINER_SIMULATION_ID'] == '1' else 0)"
    )
    launch = launcher_of(
        code, 2, poll_interval=0.05, on_failure="abandon", min_finished_fraction=1.0
    )
    message = str(run_until_failed(launch, tmp_path))
    assert "simulation 1 failed once" in message and "min_finished_fraction=1.0" in message
    assert "1 finished, 1 abandoned, 0 running, 0 exited, 0 pending (= 2)" in message, message
    assert "replaced by a new draw" not in message, message
    assert {o.simulation_id: o.status for o in launch.outcomes()} == {
        0: "finished",
        1: "abandoned",
    }
