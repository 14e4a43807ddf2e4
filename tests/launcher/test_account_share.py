"""The study account's percentage names its denominator: "of the study" once every
simulation drawn has ended, "of the M ended" for a study stopped part-way (trial 6 F6:
a study of 12 SIGTERMed with 7 ended said "2 (29% of the study) contributed none")."""

from __future__ import annotations

from melissa_trainer.launcher.account import SimulationOutcome, study_account


def _outcome(simulation_id: int, status: str) -> SimulationOutcome:
    codes = {"finished": (0,), "abandoned": (5, 5), "pending": (), "running": ()}[status]
    return SimulationOutcome(simulation_id, status, codes, "", {"x": 0.5})


def _study(ended: int, abandoned: int, total: int) -> list[SimulationOutcome]:
    return [
        _outcome(i, "abandoned" if i < abandoned else "finished" if i < ended else "pending")
        for i in range(total)
    ]


def test_a_study_stopped_part_way_gives_the_share_of_those_ended() -> None:
    outcomes = _study(ended=7, abandoned=2, total=12)
    lines, warn = study_account(outcomes, {i: (20, 0) for i in range(2, 7)})
    assert warn
    assert lines[0] == (
        "study account: 7 simulations ended, 5 contributed samples; "
        "2 (29% of the 7 ended) contributed none:"
    ), lines


def test_a_finished_study_gives_the_share_of_the_study() -> None:
    outcomes = _study(ended=12, abandoned=2, total=12)
    lines, _ = study_account(outcomes, {i: (20, 0) for i in range(2, 12)})
    assert lines[0].endswith("; 2 (17% of the study) contributed none:"), lines


def test_the_part_way_share_names_its_denominator_too() -> None:
    outcomes = [*_study(ended=4, abandoned=0, total=4), _outcome(4, "running")]
    outcomes[0] = SimulationOutcome(0, "abandoned", (1,), "", {"x": 0.5})
    lines, _ = study_account(outcomes, {i: (20, 0) for i in range(4)})
    assert lines[0].endswith("; 1 (25% of the 4 ended) failed part-way:"), lines
