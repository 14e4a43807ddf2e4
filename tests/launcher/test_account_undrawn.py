"""The study account's percentage is of the study only when the run drew the whole
study: a run stopped between draws (max_steps reached, a hook's stop, while simulations
remain undrawn) has every simulation drawn ended, and said "(40% of the study)" of a
study it ran the half of. It names what it counts then: "of the N drawn"; and, for a
run stopped with some drawn not ended, "of the M ended" (tests/launcher/
test_account_share.py has that rule's cases)."""

from __future__ import annotations

import logging

import pytest

from melissa_trainer.launcher.account import SimulationOutcome, log_account, study_account


def _outcome(simulation_id: int, status: str) -> SimulationOutcome:
    codes = {"finished": (0,), "abandoned": (5, 5), "failed": (5,), "running": ()}[status]
    return SimulationOutcome(simulation_id, status, codes, "", {"x": 0.5})


def test_a_run_stopped_between_draws_gives_the_share_of_those_drawn() -> None:
    """10 simulations in the study, 5 drawn, all ended, 2 abandoned with no sample."""
    outcomes = [_outcome(i, "abandoned" if i < 2 else "finished") for i in range(5)]
    lines, warn = study_account(outcomes, {i: (20, 0) for i in range(2, 5)}, n_simulations=10)
    assert warn
    assert lines[0] == (
        "study account: 5 simulations ended, 3 contributed samples; "
        "2 (40% of the 5 drawn) contributed none:"
    ), lines


def test_the_whole_study_drawn_and_ended_with_a_redraw_is_of_those_ended() -> None:
    """4 in the study; simulation 1 failed and was redrawn as 4: 5 drawn and ended, 4
    places. The share is of the 5 (2 of them), not of the study's 4 (a user trial read
    "3 (27% of the study)" of a study of 8 that had 11 ended: test_account_words_counts)."""
    outcomes = [_outcome(i, "failed" if i == 1 else "finished") for i in range(5)]
    outcomes[0] = _outcome(0, "abandoned")
    lines, _ = study_account(outcomes, {i: (20, 0) for i in (2, 3, 4)}, n_simulations=4)
    assert lines[0].endswith("; 2 (40% of the 5 ended) contributed none:"), lines
    # without the redraw (1 abandoned too), the same 5 are the study's own
    whole = [o._replace(status="abandoned") if o.status == "failed" else o for o in outcomes]
    lines, _ = study_account(whole, {i: (20, 0) for i in (2, 3, 4)}, n_simulations=5)
    assert lines[0].endswith("; 2 (40% of the study) contributed none:"), lines


def test_a_run_stopped_with_some_drawn_running_gives_the_share_of_those_ended() -> None:
    outcomes = [_outcome(0, "abandoned"), *(_outcome(i, "finished") for i in (1, 2, 3))]
    outcomes.append(_outcome(4, "running"))
    lines, _ = study_account(outcomes, {i: (20, 0) for i in (1, 2, 3)}, n_simulations=10)
    assert lines[0].endswith("; 1 (25% of the 4 ended) contributed none:"), lines


def test_log_account_passes_the_study_size(caplog: pytest.LogCaptureFixture) -> None:
    outcomes = [_outcome(0, "abandoned"), _outcome(1, "finished")]
    with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"):
        lines, warned = log_account(outcomes, {1: (20, 0)}, n_simulations=6)
    assert warned and lines[0].endswith("; 1 (50% of the 2 drawn) contributed none:"), lines
    assert lines[0] in caplog.text
