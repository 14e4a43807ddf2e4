"""The launcher's failure policies against real processes: redraw after
`max_restarts`, a failure beyond the policy raised from `check()`, a solver that cannot
run stopping the study early with one report (failures that differ or follow data are
left to the policy), abandon, a job that cannot start; a fresh study does not quote an
earlier run's logs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from launcher_runs import command, failure, launcher, run_study, runs, statuses

from melissa_trainer.launcher import LauncherError, make_sampler
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_after_max_restarts_the_parameters_are_redrawn_under_a_new_id(tmp_path: Path) -> None:
    abandoned: list[int] = []
    sampler = make_sampler("halton", {"x": (0, 1)}, seed=1)
    launch = launcher(
        command(tmp_path, "exit", fail=[1]), 3, sampler, tuning={"max_restarts": 1}, job_limit=2
    )
    launch.start(tmp_path / "rendezvous", abandon=abandoned.append)
    try:
        run_study(launch)
    finally:
        launch.stop()
    assert abandoned == [1]
    assert statuses(launch) == {0: "finished", 1: "failed", 2: "finished", 3: "finished"}
    state = launch.state_dict()
    assert records_of(state)[1]["exit_codes"] == [1, 1] and state["redraws"] == 1
    reference = make_sampler("halton", {"x": (0, 1)}, seed=1)
    expected = [reference.draw() for _ in range(4)]
    assert [records_of(state)[i]["parameters"] for i in range(4)] == expected
    summary = launch.summary()
    assert (summary["finished"], summary["failed"], summary["redraws"]) == (3, 1, 1)


@pytest.mark.e2e
@pytest.mark.timeout(30)
@pytest.mark.parametrize("policy", ["raise", "redraw"])
def test_a_failure_beyond_the_policy_raises_a_clear_error_from_check(
    tmp_path: Path, policy: str
) -> None:
    sim = command(tmp_path, "exit", fail=[0, 1, 2, 3])
    tuning = {"on_failure": policy, "max_restarts": 1, "max_redraws": 1}
    tuning["systematic_failures"] = None  # (all fail alike: that would stop it first)
    launch = launcher(sim, 2, tuning=tuning, job_limit=1)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    failed = 0 if policy == "raise" else 1  # with "redraw", 0 is redrawn as 2, then 1 fails
    assert f"simulation {failed} failed 2 times" in message
    assert "exit codes [1, 1]" in message and f"sim-{failed}.log" in message
    assert ("on_failure='raise'" if policy == "raise" else "max_redraws=1") in message
    assert not launch.done
    launch.stop()  # idempotent
    with pytest.raises(LauncherError, match=re.escape(message)):
        launch.check()  # still reported


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_solver_that_cannot_run_stops_the_study_after_a_few_launches_with_one_report(
    tmp_path: Path,
) -> None:
    sim = command(tmp_path, "exit", fail=list(range(200)), say="ImportError: no module fipy")
    launch = launcher(sim, 64, job_limit=2)  # the default failure policy and budget
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    started = runs(tmp_path)
    assert 4 <= len(started) <= 6  # the 4 attempts, and what started meanwhile
    headline, *report = message.splitlines()
    assert headline.startswith("the study stopped: every one of the study's first 4 attempts")
    assert "exit code 1, last log line 'ImportError: no module fipy'" in headline
    assert "systematic_failures=4" in headline and len(report) < 15  # one short report
    assert report[0].startswith("study of 64 simulations: 0 finished, 0 abandoned, ")
    counted = [int(w) for w in report[0].split("(= ")[0].split() if w.isdigit()]
    assert sum(counted[1:]) == 64 and "(= 64)" in report[0]  # the places add up
    # the 4 ended, and those launched meanwhile (still running: counted launched)
    tried = report[0].rpartition("; ")[2]
    # (or all ended: one launched meanwhile that exited before the study's error was
    # written is recorded ended too, `FailurePolicy.reap_exited`: "5 attempts in all")
    assert (tried.endswith(" attempts in all") and 4 <= int(tried.split()[0]) <= 6) or (
        tried.endswith(" attempts launched in all, 4 of them ended")
        and int(tried.split()[0]) >= len(started)
    ), tried
    assert sum("failed alike" in line for line in report) == 1  # one block, not one each


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_failures_that_differ_or_follow_data_are_left_to_the_failure_policy(
    tmp_path: Path,
) -> None:
    # each simulation fails its own way (its parameters, not the solver): no early stop
    sim = command(tmp_path, "exit", fail=[0, 1, 2, 3, 4, 5], say="diverged in simulation {sid}")
    tuning = {"max_restarts": 1, "max_redraws": 2}
    launch = launcher(sim, 2, tuning=tuning, job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "failed 2 times" in message and "the study stopped" not in message
    # identical failures after a simulation finished: the solver can run
    (tmp_path / "b").mkdir()
    sim = command(tmp_path / "b", "exit", fail=[1, 2, 3, 4, 5, 6], say="same")
    launch = launcher(sim, 3, tuning={"max_restarts": 1, "max_redraws": 2}, job_limit=1)
    launch.start(tmp_path / "b" / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "failed 2 times" in message and "the study stopped" not in message


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_abandon_gives_up_the_simulation_and_goes_on(tmp_path: Path) -> None:
    abandoned: list[int] = []
    launch = launcher(
        command(tmp_path, "exit", fail=[1]), 3, tuning={"on_failure": "abandon", "max_restarts": 0}
    )
    launch.start(tmp_path / "rendezvous", abandon=abandoned.append)
    try:
        run_study(launch)
    finally:
        launch.stop()
    assert abandoned == [1]
    assert statuses(launch) == {0: "finished", 1: "abandoned", 2: "finished"}
    assert launch.state_dict()["next_id"] == 3  # nothing redrawn


@pytest.mark.timeout(30)
def test_a_job_that_cannot_start_fails_the_study(tmp_path: Path) -> None:
    launch = launcher([str(tmp_path / "missing-solver"), "{x}"], 1)
    launch.start(tmp_path / "rendezvous")
    try:
        assert "could not start job sim-0" in str(failure(launch))
    finally:
        launch.stop()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_fresh_study_does_not_quote_an_earlier_runs_logs(tmp_path: Path) -> None:
    """A first run whose solver read a parameter the sampler lacks, then a fresh run in
    the same study directory whose solver fails without a word (the sampler now
    right): its report quoted the first run's last log line and blamed the sampler for
    a parameter the new one draws. The first run's logs are moved aside, kept."""
    first = command(tmp_path, "exit", fail=list(range(200)), say="KeyError: 'k'")
    launch = launcher(first, 8, job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        assert "the solver asked for parameter 'k'" in str(failure(launch))
    finally:
        launch.stop()
    silent = command(tmp_path, "exit", fail=list(range(200)), say="")
    launch = launcher(silent, 8, make_sampler("uniform", {"k": (0, 1)}), job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "KeyError" not in message and "sampler" not in message, message
    assert "last log line '(an empty log)'" in message.splitlines()[0], message
    (kept,) = (tmp_path / "logs").glob("previous-*")
    assert "KeyError: 'k'" in (kept / "sim-0.log").read_text()


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_the_abandon_that_fails_the_study_is_told_to_the_receivers(tmp_path: Path) -> None:
    # (htrial48: its last abandon, counted "abandoned" by the study's error and account,
    # never reached the receivers, whose end-of-run line said of it "not finished here,
    # the rest of its run missing unless it runs again": an abandoned one never does)
    abandoned: list[int] = []
    tuning = {"on_failure": "abandon", "max_restarts": 0, "systematic_failures": None}
    launch = launcher(command(tmp_path, "exit", fail=[0, 1]), 2, tuning=tuning, job_limit=1)
    launch.start(tmp_path / "rendezvous", abandon=abandoned.append)
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "min_finished_fraction" in message
    assert statuses(launch) == {0: "abandoned", 1: "abandoned"}
    assert abandoned == [0, 1]
