"""The end-of-run account names the simulations whose process exited 0 with their data
not all in when the run stopped (status "exited": rank 0's receiver behind at a SIGTERM
or max_steps), and says a resumed run runs them again, as the resume's own line does.
Before, a run stopped with 4 such simulations said only "study account: none ended.";
then "none ended." above that line, which a user trial (a SIGTERM of 2 ranks) read as a
wrong count: the head now says they exited, and points to their line."""

from __future__ import annotations

import json

from melissa_trainer.launcher import UniformSampler
from melissa_trainer.launcher.account import SimulationOutcome, resume_lines, study_account
from melissa_trainer.launcher.study_record import StudyRecord


def make(n: int, max_restarts: int = 1) -> StudyRecord:
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0),
        n,
        max_restarts=max_restarts,
        on_failure="redraw",
        max_redraws=n,
        first_simulation_id=0,
    )
    study.data_reported = True  # (receivers report data: exit 0 is "exited" until then)
    return study


def outcomes(study: StudyRecord) -> list[SimulationOutcome]:
    """As `Launcher.outcomes` builds them."""
    return [
        SimulationOutcome(
            sid, r.status, list(r.exit_codes), r.reason, dict(r.parameters), r.attempts
        )
        for sid, r in sorted(study.records.items())
    ]


def stopped_study() -> StudyRecord:
    """4 simulations: 0 and 1 finished (their data in), 2 and 3 exited 0 with theirs not."""
    study = make(4)
    for _ in range(4):
        study.take(0.0)
    for sid in range(4):
        assert study.process_ended(sid, 1.0, 0) == "exited"
    assert study.data_complete(0) and study.data_complete(1)
    assert study.ids("exited") == [2, 3]
    return study


def resumed(study: StudyRecord, complete: set[int]) -> tuple[StudyRecord, list[int]]:
    """A resume from `study`'s checkpoint whose receivers hold the data of `complete`."""
    again = make(4)
    again.load_state_dict(json.loads(json.dumps(study.state_dict())))
    return again, again.reconcile(complete)


def test_the_account_names_the_exited_and_the_resume_reruns_them() -> None:
    study = stopped_study()
    lines, some_none = study_account(outcomes(study), {0: (3, 0), 1: (3, 0)}, 4)
    assert lines[0] == (
        "study account: 2 simulations ended (2 more exited before their data was all in: "
        "below), 2 contributed samples; every one contributed."
    )
    assert not some_none
    assert len(lines) == 2, lines
    assert lines[1].startswith("  2 simulations exited with their data not all in (2-3): ")
    assert "runs them again" in lines[1]
    # the resume's line agrees: the same ids run again
    again, rerun = resumed(study, complete={0, 1})
    assert rerun == [2, 3]
    (line,) = resume_lines(outcomes(again), 4)
    assert "2 of its 4 simulations are done" in line and "; 2 run again (2-3: " in line


def test_an_exited_one_whose_data_the_checkpoint_holds_does_not_run_again() -> None:
    # (the account's "unless it holds all their data": the receivers got the rest of
    # simulation 2's data after the launcher's last look, before their checkpoint)
    _, rerun = resumed(stopped_study(), complete={0, 1, 2})
    assert rerun == [3]


def test_none_ended_still_names_the_exited() -> None:
    # (the trial's force3: stopped while rank 0's receiver was behind, all 4 exited)
    study = make(4)
    for sid in range(4):
        study.take(0.0)
        study.process_ended(sid, 1.0, 0)
    lines, some_none = study_account(outcomes(study), {}, 4)
    assert lines[0] == (
        "study account: none ended with its data in (4 exited before their data was all in: below)."
    )
    assert len(lines) == 2 and not some_none
    assert lines[1].startswith("  4 simulations exited with their data not all in (0-3): ")
    # one: its noun agrees; contributed-none accounts carry the line too
    study = make(2, max_restarts=0)  # (0 fails at once, given up and redrawn)
    study.take(0.0), study.take(0.0)
    study.process_ended(0, 1.0, 1), study.process_ended(1, 1.0, 0)
    lines, some_none = study_account(outcomes(study), {}, 2)
    assert some_none and lines[-1].startswith("  1 simulation exited with its data not all in (1)")
    assert lines[0].startswith(
        "study account: 1 simulation ended (1 more exited before its data was all in: "
        "below), 0 contributed samples; "
    )


def test_one_exited_none_ended_the_trials_words() -> None:
    # (the trial: SIGTERM of 2 ranks while rank 0's receiver was behind; "none ended."
    # read as a wrong count: one simulation's process had exited)
    study = make(2)
    study.take(0.0), study.take(0.0)
    study.process_ended(0, 1.0, 0)
    lines, some_none = study_account(outcomes(study), {0: (5, 0)}, 2)
    assert not some_none
    assert lines == [
        "study account: none ended with its data in (1 exited before its data was all in: below).",
        "  1 simulation exited with its data not all in (0): a run resumed from this "
        "checkpoint runs it again (unless it holds all its data)",
    ]
    assert not any(line.endswith("none ended.") for line in lines)


def test_no_exited_no_line() -> None:
    study = stopped_study()
    assert study.data_complete(2) and study.data_complete(3)
    lines, _ = study_account(outcomes(study), {sid: (3, 0) for sid in range(4)}, 4)
    assert lines == [
        "study account: 4 simulations ended, 4 contributed samples; every one contributed."
    ]
