"""The end-of-study counts say what they count, in the number of their count.

A user trial (htrial21) read: "2 attempts in all" in the error of a "raise" study that
had launched 3 (the attempt still running left out: `reports.study_counts` now names
the launched ones, and how many ended); "3 (27% of the study) failed part-way" in the
account of a redraw study of 8 where 11 had ended (3 redrawn: the share is of the 11
ended, `account._share_of`); and "simulations 1;", "1 failed for good, each replaced by
a new draw", "The samples they sent" of one simulation."""

from __future__ import annotations

from pathlib import Path

import pytest
from account_studies import launcher_of, run_until_failed

from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.launcher.reports import study_counts

COUNTS = {
    "finished": 1, "abandoned": 0, "not_replaced": 1, "running": 1, "exited": 0,
    "pending": 5, "failed": 1, "redraws": 0,
}  # fmt: skip


def test_the_attempts_still_running_are_counted_launched() -> None:
    line = study_counts(COUNTS, 8, 2, launched=3)
    assert line.endswith("; 3 attempts launched in all, 2 of them ended"), line
    # all ended (or no launch count given): as before
    assert study_counts(COUNTS, 8, 3, launched=3).endswith("; 3 attempts in all")
    assert study_counts(COUNTS, 8, 1).endswith("; 1 attempt in all")


def test_one_replaced_is_said_in_the_singular() -> None:
    one = {**COUNTS, "not_replaced": 0, "failed": 1, "redraws": 1, "pending": 6}
    assert "; besides, 1 failed for good, replaced by a new draw; " in study_counts(one, 8, 3)
    two = {**one, "failed": 2, "redraws": 2}
    assert "; besides, 2 failed for good, each replaced by a new draw; " in study_counts(two, 8, 4)


def _redraw_study(n: int, redrawn: int) -> list[SimulationOutcome]:
    """A redraw study of `n` that ended whole: its first `redrawn` draws failed
    part-way and were redrawn, the `n` others finished."""
    return [
        SimulationOutcome(i, "failed" if i < redrawn else "finished", (3,), "", {"k": 0.9})
        for i in range(n + redrawn)
    ]


def test_a_redraw_study_gives_the_share_of_those_ended() -> None:
    outcomes = _redraw_study(8, 3)  # the trial's: 11 ended in a study of 8
    lines, _ = study_account(outcomes, {i: (3, 0) for i in range(11)}, 8)
    assert lines[0] == (
        "study account: 11 simulations ended, 11 contributed samples; 3 (27% of the 11 "
        "ended) failed part-way:"
    ), lines
    assert lines[1].startswith(
        "  3 given up part-way (redrawn), after sending some samples: simulations 0, 1, 2; "
        "e.g. simulation 0, "
    ), lines
    assert "The samples the trainer received from them were trained on; " in lines[1]
    # with no redraw, the same share is the study's own
    whole = [o._replace(status="abandoned") if o.status == "failed" else o for o in outcomes]
    lines, _ = study_account(whole, {i: (3, 0) for i in range(11)}, 11)
    assert lines[0].endswith("; 3 (27% of the study) failed part-way:"), lines


def test_one_simulation_is_named_in_the_singular() -> None:
    outcomes = _redraw_study(2, 1)
    lines, _ = study_account(outcomes, {i: (3, 0) for i in range(3)}, 2)
    assert lines[1].startswith(
        "  1 given up part-way (redrawn), after sending some samples: simulation 0, exit "
        "codes [3], parameters {'k': 0.9}. The samples the trainer received from it were trained "
        "on; if the solver fails there for its parameters, "
    ), lines


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_raised_study_counts_the_attempt_still_running(tmp_path: Path) -> None:
    # 0 runs until the stop; 1 exits 3 and fails the study: 2 launched, 1 ended
    code = (
        "import os, sys, time; "
        "sid = int(os.environ['MELISSA_TRAINER_SIMULATION_ID']); "
        "sys.exit(3) if sid == 1 else time.sleep(60)"
    )
    launch = launcher_of(code, 3, job_limit=2, log_dir=tmp_path / "logs", on_failure="raise")
    error = run_until_failed(launch, tmp_path)
    counts = str(error).splitlines()[1]
    assert counts == (
        "study of 3 simulations: 0 finished, 0 abandoned, 1 failed (not replaced), 1 running, "
        "0 exited, 1 pending (= 3); 2 attempts launched in all, 1 of them ended"
    ), counts
