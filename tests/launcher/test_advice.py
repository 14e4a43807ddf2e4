"""`Advice`'s start-up warning names a fix the solver can use: worker mode for a Python
solver only (it needs the Python client's ``next_simulation()``), what helps a compiled
one for the C client (and the Fortran bindings on it), worker mode conditionally for a
client that did not say. The launcher's real path (a C solver's HELLO to this message)
is tests/launcher/test_compiled_advice.py's."""

from __future__ import annotations

import logging

import pytest
from launcher_said import one_line

from melissa_trainer.launcher.advice import Advice


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages logged, each as one line (a WARNING is cut at 100 columns)."""
    return [one_line(r.getMessage()) for r in caplog.records]


def advice_for(
    client: str | None, caplog: pytest.LogCaptureFixture, worker_hint: str | None = None
) -> list[str]:
    caplog.clear()
    advice = Advice(worker_mode=False, worker_hint=worker_hint)
    advice.first_message(3, 6.0, client)
    advice.ended(3, 0, 7.0)  # a start-up of 6 s in 7 s: dominates
    advice.first_message(4, 6.0, client)
    advice.ended(4, 0, 7.0)
    return [said for said in _said(caplog) if "dominates" in said]


def test_the_start_up_fix_depends_on_the_client_the_hello_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    (python,) = advice_for("python", caplog)  # once per study
    assert "simulation 3 spent 6.0 s of its 7.0 s" in python
    assert "Worker mode pays it once per job: Launcher(..., worker=True)" in python
    (c,) = advice_for("c", caplog)
    assert "worker=True" not in c and "C and Fortran clients have no worker mode" in c
    assert "fewer, longer simulations" in c and "startup_timeout" in c
    assert "docs/how-to/compiled-solver.md" in c
    (unknown,) = advice_for(None, caplog)
    assert unknown.count("If the solver uses the Python client, worker mode") == 1
    assert "the C and Fortran clients have no worker mode" in unknown


def test_a_programs_worker_hint_comes_first_in_the_python_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A program that turns worker mode on for its user (the heat example's ``--worker``)
    is named before the library's ``Launcher(..., worker=True)``, which that user does
    not write; a C solver, which has no worker mode, is told the same as without it."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    hint = "add --worker to this example's command line"
    (python,) = advice_for("python", caplog, hint)
    assert (
        "Worker mode pays it once per job: add --worker to this example's command line; in a "
        "study of your own, Launcher(..., worker=True), the solver looping on" in python
    ), python
    (unknown,) = advice_for(None, caplog, hint)
    assert (
        "If the solver uses the Python client, worker mode pays it once per job: add --worker"
        in unknown
    )
    (c,) = advice_for("c", caplog, hint)
    assert "--worker" not in c and "The C and Fortran clients have no worker mode" in c


def test_no_start_up_advice_in_worker_mode_whatever_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    for client in ("python", "c", None):
        advice = Advice(worker_mode=True)
        advice.first_message(1, 6.0, client)
        advice.ended(1, 0, 7.0)
    assert not [r for r in caplog.records if "dominates" in one_line(r.getMessage())]


def repeated(caplog: pytest.LogCaptureFixture, first_messages: bool) -> str:
    """The advice on two attempts of simulation 5 killed for silence, each having sent a
    first message (a hang mid-run) or none (killed in its start-up)."""
    caplog.clear()
    advice = Advice(worker_mode=False)
    for attempt in range(2):
        if first_messages:
            advice.first_message(5, 1.0, "c")
        advice.ended(5, "timeout", 20.0)
        advice.failed(5, ["timeout"] * (attempt + 1))
    (said,) = [said for said in _said(caplog) if "on its restart" in said]
    return said


def test_a_start_up_killed_twice_is_told_the_start_up_bound_not_only_max_restarts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Killed before its first message on its attempt and its restart (a user trial: a C
    solver loading its mesh for 25 s under simulation_timeout=10): the advice names the
    start-up's bound and how to raise it; max_restarts=0 alone would redraw parameters
    that start as slowly. A hang after a first message keeps the max_restarts advice."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    start = repeated(caplog, first_messages=False)
    assert start.startswith("simulation 5 killed before its first message again on its restart")
    assert "LauncherTuning(startup_timeout=...)" in start, start
    assert "Run one simulation's command by hand" in start, start
    assert "simulation run again sends its first step at once" in start, start
    mid = repeated(caplog, first_messages=True)
    assert mid.startswith("simulation 5 hung again on its restart"), mid
    assert "startup_timeout" not in mid and "LauncherTuning(max_restarts=0)" in mid, mid


def test_a_reruns_start_up_is_not_judged_only_a_first_attempts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rerun (an attempt after the first) does not send the steps its receivers hold,
    and its first send may go to another rank's receiver than the one the launcher
    hears: a user trial's resumed 2-rank run read "spent 14.3 s of its 15.1 s before its
    first message" of a solver that starts in 5 s, and was advised worker mode. A first
    attempt's start-up is still judged."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    advice = Advice(worker_mode=False)
    advice.first_message(5, 14.3, "python", rerun=True)
    advice.ended(5, 0, 15.1)
    assert [r for r in caplog.records if "dominates" in one_line(r.getMessage())] == []
    # not a start-up alone: summed apart (it was in startup_seconds, which said start-up)
    assert advice.startup_seconds == 0.0
    assert advice.rerun_startup_seconds == pytest.approx(14.3)
    advice.first_message(9, 6.0, "python")  # a first attempt
    advice.ended(9, 0, 7.0)
    assert advice.startup_seconds == pytest.approx(6.0)
    assert advice.rerun_startup_seconds == pytest.approx(14.3)
    told = [said for said in _said(caplog) if "dominates" in said]
    assert len(told) == 1 and told[0].startswith("simulation 9 spent 6.0 s of its 7.0 s")
