"""The study account's head line counts its simulations in words a user reads."""

from __future__ import annotations

import pytest

from melissa_trainer.launcher.account import SimulationOutcome, study_account


def _finished(simulation_id: int) -> SimulationOutcome:
    return SimulationOutcome(simulation_id, "finished", (0,), "", {"x": 0.5})


@pytest.mark.parametrize(
    ("n", "head"),
    [
        (1, "study account: 1 simulation ended, 1 contributed samples; every one contributed."),
        (2, "study account: 2 simulations ended, 2 contributed samples; every one contributed."),
    ],
)
def test_the_head_line_says_simulation_for_one_and_simulations_for_more(n: int, head: str) -> None:
    outcomes = [_finished(i) for i in range(n)]
    lines, warn = study_account(outcomes, {i: (5, 0) for i in range(n)})
    assert lines == [head]
    assert not warn


def test_simulations_still_running_are_left_out_of_the_count() -> None:
    outcomes = [_finished(0), SimulationOutcome(1, "running", (), "", {"x": 0.1})]
    lines, _ = study_account(outcomes, {0: (5, 0)})
    assert lines[0].startswith("study account: 1 simulation ended, 1 contributed samples")


def test_a_study_where_none_ended_says_so() -> None:
    """Trial F3: "0 simulations ended, 0 contributed samples; every one contributed."."""
    outcomes = [SimulationOutcome(0, "running", (), "", {"x": 0.1})]
    assert study_account(outcomes, {}) == (["study account: none ended."], False)
