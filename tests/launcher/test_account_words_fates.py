"""The study account puts each simulation once, under the heading of its fate: one
given up and replaced by a new draw is "given up part-way (redrawn)", the one the study
stopped on ("raise", or a "redraw" study out of its redraws) is "failed, not replaced"
(`SimulationOutcome.not_replaced`, from `StudyRecord.not_replaced_ids`).

Before, a user trial (htrial21) read, after a "raise" run whose summary said "1 failed
(not replaced)": "1 given up part-way (redrawn), after sending some samples: simulations
1;"; and after a redraw run with max_redraws=1: "2 given up part-way (redrawn) ...:
simulations 1, 3", 3 being the failure the study stopped on, which nothing replaced.
Each test runs a real `Launcher` study to its failure and feeds its outcomes to the
account, as `Study.stop` does, with the samples each simulation sent (the solver here
sends none: the counts stand for a receiver's)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from account_studies import exits_3, launcher_of, run_until_failed

from melissa_trainer.launcher.account import SimulationOutcome, study_account

#: the study's size
N = 4
#: the account's headings, by fate, as its bucket lines begin
GIVEN_UP = "given up part-way (redrawn)"
NOT_REPLACED = "failed, not replaced (the study stopped on it)"


def run_to_failure(tmp_path: Path, failing: set[int], **tuning: object) -> list[SimulationOutcome]:
    """A real study of `N` simulations, one at a time, where those with an id in
    `failing` exit 3 (the others 0); returns its outcomes once it has failed and
    stopped."""
    launch = launcher_of(exits_3(failing), N, log_dir=tmp_path / "logs", **tuning)
    run_until_failed(launch, tmp_path)
    return launch.outcomes()


def buckets(lines: list[str]) -> dict[int, str]:
    """Each simulation the account's bucket lines name -> the line's heading (what
    stands between its count and ", after" or ":"); fails on an id named twice."""
    placed: dict[int, str] = {}
    for line in lines[1:]:
        head, _, rest = line.strip().partition(": simulation")
        listed = re.match(r"s? (\d+(?:, \d+)*)", rest)
        assert listed is not None, line
        for sid in map(int, listed.group(1).split(", ")):
            assert sid not in placed, (sid, lines)
            placed[sid] = head.split(" ", 1)[1].split(", after")[0]
    return placed


def account(outcomes: list[SimulationOutcome], samples: Mapping[int, tuple[int, int]]) -> list[str]:
    lines, warned = study_account(outcomes, samples, N)
    assert warned or all("contributed none" not in line for line in lines)
    return lines


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_raise_says_the_failure_it_stopped_on_failed_not_replaced(tmp_path: Path) -> None:
    outcomes = run_to_failure(tmp_path, {1}, on_failure="raise")
    assert [(o.simulation_id, o.status, o.not_replaced) for o in outcomes] == [
        (0, "finished", False),
        (1, "failed", True),
    ]
    lines = account(outcomes, {0: (2, 0), 1: (2, 0)})
    assert buckets(lines) == {1: NOT_REPLACED}, lines
    assert lines[1].startswith(
        f"  1 {NOT_REPLACED}, after sending some samples: simulation 1, exit codes [3], "
    ), lines
    assert "The samples the trainer received from it were trained on" in lines[1]
    assert "redrawn" not in "\n".join(lines)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_redraw_study_out_of_redraws_tells_the_redrawn_from_the_last(tmp_path: Path) -> None:
    # 1 fails: redrawn (the one redraw allowed); 2 fails: the study fails on it
    outcomes = run_to_failure(
        tmp_path, {1, 2}, on_failure="redraw", max_redraws=1, min_finished_fraction=0.1
    )
    fates = {o.simulation_id: (o.status, o.not_replaced) for o in outcomes}
    assert fates == {0: ("finished", False), 1: ("failed", False), 2: ("failed", True)}
    lines = account(outcomes, {sid: (2, 0) for sid in fates})
    assert buckets(lines) == {1: GIVEN_UP, 2: NOT_REPLACED}, lines
    assert lines[1].startswith(f"  1 {GIVEN_UP}, after sending some samples: simulation 1, ")
    assert lines[2].startswith(f"  1 {NOT_REPLACED}, after sending some samples: simulation 2, ")
    # the advice once, after both, of both ("them"); 3 ended of a study of 4: the drawn
    assert (
        "The samples" not in lines[1] and "The samples the trainer received from them" in lines[2]
    ), lines
    assert lines[0].endswith("2 (67% of the 3 drawn) failed part-way:"), lines


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_failure_with_no_sample_is_said_not_replaced_too(tmp_path: Path) -> None:
    outcomes = run_to_failure(
        tmp_path, {1, 2}, on_failure="redraw", max_redraws=1, min_finished_fraction=0.1
    )
    lines = account(outcomes, {0: (2, 0)})  # neither 1 nor 2 sent a sample
    assert lines[1].startswith(
        "  2 failed with no sample received: simulations 1, 2; e.g. simulation 1, exit codes"
    ), lines
    assert lines[1].endswith(f"; {NOT_REPLACED}: simulation 2"), lines
    assert len(lines) == 2, lines
