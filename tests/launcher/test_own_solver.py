"""A user's own solver, told plainly (issue 44): real studies on a `LocalBackend`, with
solvers that fail or hang on purpose, and what the launcher says of them (the studies:
`own_solver`; start-up: test_own_solver_startup.py; the account:
test_own_solver_account.py)."""

from __future__ import annotations

import logging
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import drain
from launcher_said import one_line
from own_solver import failure, solver, study
from waiting import wait_until

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]


# -- failures that are not the solver's ---------------------------------------------------


@pytest.mark.timeout(90)
def test_a_parameter_the_sampler_does_not_draw_names_both_sides(tmp_path: Path) -> None:
    sim = solver(tmp_path, reads=["D", "k"])  # the solver reads k; the bounds lack it
    launch, receiver, _ = study(tmp_path, sim, 8, {"D": (0.1, 1.0), "F": (0.0, 0.1)}, job_limit=2)
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    headline = message.splitlines()[0]
    assert "the solver asked for parameter 'k'" in headline and "at fault" not in headline
    assert "asked for parameter 'k'" in headline and "['D', 'F']" in headline
    assert "The solver or its environment is at fault" not in message


@pytest.mark.timeout(90)
def test_a_key_error_of_a_drawn_parameter_is_not_blamed_on_the_sampler(tmp_path: Path) -> None:
    # the solver's own KeyError (here of a name the sampler draws: its dict, not ours)
    path = tmp_path / "solver.py"
    path.write_text("import sys\nraise KeyError('x')\n")
    launch, receiver, _ = study(tmp_path, [sys.executable, str(path)], 8, {"x": (0, 1)})
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    assert "The solver or its environment is at fault" in message
    assert "sampler is at fault" not in message


@pytest.mark.timeout(90)
def test_a_study_whose_every_simulation_is_refused_says_why_in_its_headline(
    tmp_path: Path,
) -> None:
    sim = solver(tmp_path, shape=[47, 48])
    launch, receiver, _ = study(
        tmp_path, sim, 8, {"x": (0, 1)}, fields={"u": ((48, 48), "float32")}, job_limit=2
    )
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    headline = message.splitlines()[0]
    assert "the study stopped" in headline
    assert "(47, 48)" in headline and "(48, 48)" in headline  # the receiver's reason
    assert "an empty log" not in message and "ReceiverConfig(fields=...)" in headline


# -- deterministic failures ---------------------------------------------------------------


def advice(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if "max_restarts=0" in one_line(r.getMessage())
    ]


@pytest.mark.timeout(90)
def test_a_deterministic_hang_is_told_once_that_restarts_only_repeat_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[1, 2])  # these ids hang whenever they run
    # (a hang after the first message is killed after silence_floor; the start-up bound,
    # 600 s, leaves a slow start on a loaded machine alone)
    tuning = {"silence_floor": 1.0, "max_restarts": 2, "on_failure": "raise"}
    launch, receiver, _ = study(tmp_path, sim, 4, {"x": (0, 1)}, tuning=tuning, job_limit=4)
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    told = advice(caplog)
    assert len(told) == 1, told  # once per study, not once per restart
    assert "hung again on its restart" in told[0] and "['timeout', 'timeout']" in told[0]
    # the failed study's error says it too
    assert "failed the same way on every attempt" in message
    assert "LauncherTuning(max_restarts=0)" in message


@pytest.mark.timeout(90)
def test_a_hang_mid_run_is_told_how_to_catch_it_sooner_from_its_step_gaps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kill line and the "hung again" advice say both directions: a higher
    silence_floor to wait longer, and (a user trial's hang cost 3 x 120 s with 0.6 s
    steps) the lower one that the simulation's own step gaps allow."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    step, floor = 0.1, 8.0
    sim = solver(tmp_path, hang=[1], hang_after=3, steps=5, step_time=step)
    tuning = {"silence_floor": floor, "max_restarts": 1, "on_failure": "raise"}
    launch, receiver, _ = study(tmp_path, sim, 2, {"x": (0, 1)}, tuning=tuning, job_limit=2)
    try:
        failure(launch)
    finally:
        launch.stop()
        receiver.stop()
    lines = [one_line(r.getMessage()) for r in caplog.records]
    kills = [line for line in lines if line.startswith("simulation 1 (attempt")]
    assert len(kills) == 2, lines
    for attempt, kill in enumerate(kills):
        assert "needs a higher silence_floor" in kill  # waiting longer, as before
        told = re.search(
            r"the study has seen, of any simulation, was ([\d.]+) s \(this attempt's: "
            r"(?:([\d.]+) s|it sent one message)\): if no step takes longer, "
            r"LauncherTuning\(silence_floor=(\d+)\) "
            r".* catches a hang sooner, after (\d+) s instead of 8 s",
            kill,
        )
        assert told is not None, kill
        gap, tighter = float(told.group(1)), int(told.group(3))
        if attempt == 0:  # (the restart skips the steps held: its one message a sign of life)
            own = float(told.group(2))
            # its steps came `step` apart (the solver sleeps so), seen within a few ticks
            assert step <= own + 0.05 and own <= gap
        assert tighter < floor
        # silence_factor x the study's longest gap, rounded up; a floor above that
        # gives the bound it says
        assert tighter >= 10 * gap and int(told.group(4)) == tighter
    again = [line for line in lines if "hung again on its restart" in line]
    assert len(again) == 1 and "catches a hang sooner" in again[0], again


@pytest.mark.timeout(120)
def test_a_restart_that_hangs_at_start_up_is_not_told_the_previous_kills_hint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The "hung again on its restart" WARNING tells the way to catch a hang sooner of
    the restart's own kill: none for a kill before its first message, where a lower
    silence_floor changes nothing (before, the hint of the previous attempt's kill
    mid-run was repeated)."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[0], hang_after=3, steps=5, step_time=0.1, hang_at_start=[1])
    # (silence_factor 2: the restart's start-up is killed at startup_timeout, 10 s, unless
    # the first start-up took more than 5 s; the floor, 8 s, bounds the hang mid-run)
    tuning = {"silence_floor": 8.0, "silence_factor": 2.0, "startup_timeout": 10.0,
              "max_restarts": 1, "on_failure": "raise"}  # fmt: skip
    launch, receiver, _ = study(tmp_path, sim, 1, {"x": (0, 1)}, tuning=tuning)
    try:
        failure(launch, 100.0)
    finally:
        launch.stop()
        receiver.stop()
    lines = [one_line(r.getMessage()) for r in caplog.records]
    mid_run, at_start = [line for line in lines if line.startswith("simulation 0 (attempt")]
    assert "since its last message" in mid_run and "catches a hang sooner" in mid_run
    assert "no message yet" in at_start and "catches a hang sooner" not in at_start
    (again,) = [line for line in lines if "hung again on its restart" in line]
    assert "catches a hang sooner" not in again, again


@pytest.mark.timeout(90)
def test_max_restarts_0_redraws_a_deterministic_hang_at_its_first_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[1])  # id 1 hangs; its redraw (id 4) does not
    tuning = {"silence_floor": 1.0, "max_restarts": 0}
    launch, receiver, buffer = study(tmp_path, sim, 4, {"x": (0, 1)}, tuning=tuning, job_limit=4)
    try:
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        launch.stop()
        receiver.stop()
    complete = Counter(int(s["simulation_id"]) for s in samples)
    assert {sid for sid, n in complete.items() if n == 3} == {0, 2, 3, 4}  # 4 replaced 1
    assert complete[1] == 1  # its first step, then given up after one attempt
    summary = launch.summary()
    assert summary["restarts"] == 0 and summary["redraws"] == 1
    assert advice(caplog) == []  # nothing failed twice: nothing to advise
