"""The examples' JSON summary (examples/study_report.py `run_summary`) says a figure only
where it was measured: after a resume the launcher's simulation time spans both runs,
so "sequential_seconds" (simulating first, then training) is not this run's figure and
is None, as the printed line says ("overlap: not measured for a run resumed from ...").
A user trial read 1.49 s in a resumed run's JSON against 3.04 s in the first. The
printed line (`print_overlap`) says that same figure and what it is made of."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from study_report import print_overlap, run_summary

pytestmark = pytest.mark.timeout(60)


def summary(resumed_from: str | None) -> dict[str, Any]:
    trainer = SimpleNamespace(
        state=SimpleNamespace(total_samples_seen=80, global_step=10, log_history=[])
    )
    launcher = SimpleNamespace(
        summary=lambda: {"simulation_seconds": 6.0, "finished": 8}, draws_path=None
    )
    return run_summary(trainer, launcher, 1.5, 4.0, 2, resumed_from=resumed_from)  # type: ignore[arg-type]


def test_a_fresh_run_says_how_long_one_after_the_other_would_take() -> None:
    assert summary(None)["sequential_seconds"] == 6.0 / 2 + 1.5


def test_the_study_s_files_are_named(tmp_path: Path) -> None:
    """``draws_csv`` and ``held_out_csv`` name the launcher's draws.csv and the last
    validation's per-held-out-simulation losses (a user trial had to find them); None
    where there are none (before, the keys did not exist)."""
    draws = tmp_path / "study" / "draws.csv"
    trainer = SimpleNamespace(
        state=SimpleNamespace(total_samples_seen=0, global_step=0, log_history=[]),
        held_out_losses=SimpleNamespace(step=30),
        args=SimpleNamespace(output_dir=str(tmp_path)),
    )
    (tmp_path / "held_out_losses.csv").write_text("step,simulation_id,loss\n30,4,0.5\n")
    launcher = SimpleNamespace(summary=lambda: {}, draws_path=draws)
    got = run_summary(trainer, launcher, 0.0, 0.0, 1)  # type: ignore[arg-type]
    assert got["draws_csv"] == str(draws)
    assert got["held_out_csv"] == str(tmp_path / "held_out_losses.csv")
    none = summary(None)
    assert none["draws_csv"] is None and none["held_out_csv"] is None


def test_a_held_out_file_not_written_by_this_validation_is_not_named(tmp_path: Path) -> None:
    """The file could not be written (a WARNING, training went on): ``held_out_csv`` is
    None, also where an earlier run's file stays (hrev4: before, the path was named
    whenever a validation had made the losses)."""
    trainer = SimpleNamespace(
        state=SimpleNamespace(total_samples_seen=0, global_step=0, log_history=[]),
        held_out_losses=SimpleNamespace(step=30),
        args=SimpleNamespace(output_dir=str(tmp_path)),
    )
    launcher = SimpleNamespace(summary=lambda: {}, draws_path=None)
    assert run_summary(trainer, launcher, 0.0, 0.0, 1)["held_out_csv"] is None  # type: ignore[arg-type]
    (tmp_path / "held_out_losses.csv").write_text("step,simulation_id,loss\n20,4,0.5\n")
    assert run_summary(trainer, launcher, 0.0, 0.0, 1)["held_out_csv"] is None  # type: ignore[arg-type]


def test_a_resumed_run_does_not() -> None:
    got = summary("/out/checkpoints/checkpoint-40")
    assert got["sequential_seconds"] is None
    assert got["simulation_seconds"] == 6.0  # (the launcher's, spanning both runs: said)
    assert got["resumed_from"] == "/out/checkpoints/checkpoint-40"


def test_the_overlap_line_is_one_comparison_whose_sum_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user trial could not read "123.0 s wall for 156.0 s of simulation (48 runs, 2 at
    a time) + 117.9 s of training = 273.9 s; one after the other they would take at least
    195.9 s": two sequential totals (the runs one at a time, then 2 at a time), neither
    said. Now one: the wall time against simulating first, 2 at a time, then training,
    whose two terms it prints (78.0 + 117.9 = 195.9, the JSON's sequential_seconds). Not
    "at least" (as it said until a user trial): the runs' wall times count their waits
    on training's back-pressure, 93.4 s of runs that took 22.4 s unpaced."""
    study = {"simulation_seconds": 156.0, "finished": 48}
    print_overlap(study, 123.0, 117.9, 2)
    assert capsys.readouterr().out == (
        "overlap: 123.0 s wall, against 195.9 s one stage after the other: 78.0 s to "
        "simulate (48 runs of 156.0 s in all, 2 at a time; their wall times, waits on "
        "training's back-pressure included), then 117.9 s to train\n"
    )
    print_overlap(study, 123.0, 117.9, 2, resumed_from="/out/checkpoints/checkpoint-40")
    assert capsys.readouterr().out == (
        "overlap: not measured for a run resumed from /out/checkpoints/checkpoint-40: the "
        "study's 156.0 s of simulation (48 runs) span the earlier run too\n"
    )
    print_overlap({}, 123.0, 117.9, 2)  # external mode: no launcher, no line
    assert capsys.readouterr().out == ""


def test_the_overlap_line_counts_the_failed_attempts_its_seconds_hold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The launcher's seconds sum every ended attempt, a failed one too
    (`StatusIndex.stopwatch`): a user trial (htrial5, 2 ranks, simulation 1 failing 3
    times, then redrawn) read "4 runs of 10.2 s in all" for 4 finished runs and 3
    failed attempts (2 restarts, 1 given up). Now it says both."""
    study = {"simulation_seconds": 10.2, "finished": 4, "failed": 1, "restarts": 2}
    print_overlap(study, 5.6, 0.0, 2)
    assert capsys.readouterr().out == (
        "overlap: 5.6 s wall, against 5.1 s one stage after the other: 5.1 s to "
        "simulate (4 runs finished and 3 that failed, 10.2 s in all, 2 at a time; their "
        "wall times, waits on training's back-pressure included), then 0.0 s to train\n"
    )
    print_overlap(study, 5.6, 0.0, 2, resumed_from="/out/checkpoints/checkpoint-1")
    assert capsys.readouterr().out == (
        "overlap: not measured for a run resumed from /out/checkpoints/checkpoint-1: the "
        "study's 10.2 s of simulation (4 runs finished and 3 that failed) span the "
        "earlier run too\n"
    )
