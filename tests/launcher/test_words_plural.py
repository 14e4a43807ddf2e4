"""A count of one is said with its noun singular in the launcher's words (`words.plural`).

A user trial read "and 1 simulations failed for good, more than the 0 that
LauncherTuning.min_finished_fraction=1.0 allows" in a study's error; the study's counts
said "study of 1 simulations: ...; 1 attempts in all" for a study of one, and other lines
"1 job(s)", "1 simulation(s)". Each line below is one the user reads.
"""

from __future__ import annotations

import pytest

from melissa_trainer.common.words import plural
from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.reports import kills_report, repeated_failures, study_counts
from melissa_trainer.launcher.study_change import StudyChanged, check_resume
from melissa_trainer.launcher.study_record import StudyRecord


def test_plural_is_singular_for_one_only() -> None:
    assert plural(1, "simulation") == "1 simulation"
    assert plural(0, "simulation") == "0 simulations"
    assert plural(2, "loss") == "2 losses" and plural(1, "loss") == "1 loss"
    assert plural(3, "parameter set") == "3 parameter sets"
    assert plural(2, "child", "children") == "2 children"


def one_failing(n: int, fraction: float) -> StudyRecord:
    """A study of `n` whose first simulation failed for good (no restart, "redraw")."""
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0), n, max_restarts=0, on_failure="redraw",
        max_redraws=n, min_finished_fraction=fraction, first_simulation_id=0,
    )  # fmt: skip
    assert study.take(0.0) == 0
    assert study.process_ended(0, 1.0, 3) == "raise"
    return study


def test_the_failure_budget_says_one_simulation() -> None:
    study = one_failing(2, 1.0)
    assert "and 1 simulation failed for good, more than the 0 that" in study.failure, study.failure


def test_a_study_of_one_counts_in_the_singular() -> None:
    study = one_failing(1, 1.0)
    line = study_counts(study.summary(1.0), study.n_simulations, 1)
    assert line.startswith("study of 1 simulation: 0 finished, 0 abandoned, 1 failed"), line
    assert line.endswith("; 1 attempt in all"), line


def test_the_reports_lines_say_one_job_and_one_simulation() -> None:
    assert kills_report(["sim-0"], 2.0).startswith("stopping: killing 1 job (sim-0)")
    lines = repeated_failures([(4, "simulation 4", (3, 3))])
    assert lines[0].startswith("  1 simulation (4) failed the same way"), lines


def test_a_checkpoint_that_ended_says_one_simulation() -> None:
    def record(n: int) -> StudyRecord:
        return StudyRecord(
            UniformSampler({"a": (0.0, 1.0)}, seed=0), n, max_restarts=0,
            on_failure="redraw", max_redraws=n, first_simulation_id=0,
        )  # fmt: skip

    study = record(1)
    assert study.take(0.0) == 0
    assert study.process_ended(0, 1.0, 0) == "finished"  # (no data report: exit 0 finishes)
    with pytest.raises(StudyChanged) as info:
        check_resume(study.state_dict(), record(2))  # (a study grown after its end)
    assert "(its 1 simulation finished or abandoned" in str(info.value), info.value
