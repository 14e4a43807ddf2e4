"""A failed study counts each simulation once, in the bucket it is in: the simulation
whose failure failed the study (``on_failure="raise"``, or a "redraw" study out of its
redraws) is "failed, not replaced", never "pending" (`StudyRecord.summary`, and the
study's error, `reports.study_counts`).

Before, a user trial of a 3-simulation study under "raise" read "1 finished, 0
abandoned, 0 running, 0 exited, 2 pending (= 3); besides, 1 failed for good, not
replaced": the failed simulation held its place as one "pending" (undrawn) as well.

The invariant, checked at every tick of a real `Launcher` run: the summary's places
(finished, abandoned, failed and not replaced, running, exited, pending) add up to the
study's size, and each one's count is that of the records in its status (pending: the
queued ones plus the places not drawn yet; failed: every record given up for good).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from account_studies import exits_3, failure, launcher_of

from melissa_trainer.launcher import Launcher

#: the study's size
N = 3


def buckets_agree(launch: Launcher) -> None:
    """The invariant (module docstring) on `launch`'s summary and records now."""
    summary = launch.summary()
    outcomes = launch.outcomes()
    statuses = Counter(o.status for o in outcomes)
    failed = statuses["failed"]
    replaced = int(summary["redraws"])
    kept = failed - replaced  # failed for good and not replaced: it holds its place
    assert summary["not_replaced"] == kept >= 0, (summary, statuses)
    # the places drawn, and those not drawn yet (pending, as a queued one is)
    undrawn = N - (len(outcomes) - replaced)
    assert undrawn >= 0, (summary, statuses)
    assert summary["finished"] == statuses["finished"]
    assert summary["abandoned"] == statuses["abandoned"]
    assert summary["failed"] == failed
    assert summary["exited"] == statuses["exited"]
    assert summary["running"] == statuses["running"] + statuses["complete"]
    assert summary["pending"] == statuses["pending"] + undrawn, (summary, statuses)
    places = ("finished", "abandoned", "not_replaced", "running", "exited", "pending")
    assert sum(summary[k] for k in places) == N, (summary, statuses)


def run_to_failure(tmp_path: Path, failing: set[int], **tuning: object) -> tuple[Launcher, str]:
    """A real study of `N` simulations, one at a time, where those with an id in
    `failing` exit 3; checks `buckets_agree` at every tick until the study fails.
    Returns the launcher (stopped) and its error's message."""
    launch = launcher_of(exits_3(failing), N, log_dir=tmp_path / "logs", **tuning)
    launch.start(tmp_path / "rendezvous")
    try:
        error = failure(launch, 30.0, tick=lambda: buckets_agree(launch))
        buckets_agree(launch)  # (after its failure, as the user reads it)
    finally:
        launch.stop()
    buckets_agree(launch)  # and after the stop
    return launch, str(error)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_raise_counts_the_failed_simulation_failed_not_pending(tmp_path: Path) -> None:
    launch, message = run_to_failure(tmp_path, {1}, on_failure="raise")
    summary = launch.summary()
    assert (summary["finished"], summary["failed"], summary["not_replaced"]) == (1, 1, 1)
    assert summary["pending"] == 1, summary  # simulation 2, never drawn: not simulation 1
    assert {o.simulation_id: o.status for o in launch.outcomes()} == {0: "finished", 1: "failed"}
    assert (
        "study of 3 simulations: 1 finished, 0 abandoned, 1 failed (not replaced), 0 running, "
        "0 exited, 1 pending (= 3); 2 attempts in all"
    ) in message, message


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_redraw_study_out_of_redraws_counts_its_last_failure_failed(tmp_path: Path) -> None:
    # 1 fails: redrawn (the one redraw allowed); 2 fails: the study fails on it
    launch, message = run_to_failure(
        tmp_path, {1, 2}, on_failure="redraw", max_redraws=1, min_finished_fraction=0.1
    )
    summary = launch.summary()
    assert (summary["finished"], summary["failed"], summary["redraws"]) == (1, 2, 1)
    assert summary["not_replaced"] == 1 and summary["pending"] == 1, summary  # 1's replacement
    assert "max_redraws=1 redraws are used up" in message, message
    assert (
        "study of 3 simulations: 1 finished, 0 abandoned, 1 failed (not replaced), 0 running, "
        "0 exited, 1 pending (= 3); besides, 1 failed for good, replaced by a new draw; "
        "3 attempts in all"
    ) in message, message
