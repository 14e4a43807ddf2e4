"""docs/how-to/own-solver.md quotes the study account of a run stopped while simulations
had exited 0 with their data not all in (status "exited"): the page's lines are the
ones `study_account` writes for 2 such simulations and none ended, so the page cannot
keep words the code dropped (a user trial read "none ended." as a wrong count)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.launcher.account import SimulationOutcome, study_account

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "own-solver.md"


@pytest.mark.timeout(30)
def test_the_page_quotes_the_account_of_exited_simulations() -> None:
    exited = [SimulationOutcome(sid, "exited", [0], "", {"a": 0.5}) for sid in (0, 1)]
    lines, warned = study_account(exited, {0: (3, 0)}, 4)
    assert not warned and len(lines) == 2
    page = PAGE.read_text().splitlines()
    for line in lines:
        assert line in page, f"own-solver.md lacks the account's line {line!r}"
