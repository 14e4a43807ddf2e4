"""Severity LOW. User trial htrial34 (a new user wiring a slow solver of their own).

What the user did: a launcher whose command's program does not exist, a typo
(``Launcher(["pythn3", "solver.py"], ...)`` where ``sys.executable`` was meant).

What happened: the study stopped with ``the local backend could not start job sim-0
(['pythn3', 'solver.py']): cannot start job sim-0 (['pythn3', 'solver.py']): [Errno 2]
No such file or directory: 'pythn3'``: the job and its command said twice, and no fix
(the project's rule: an error names the fix).

What was expected: the job named once, and the fix: give the program's full path, or
``sys.executable`` for a Python solver run by this interpreter. Fixed (the local
backend's message names the fix; the supervisor no longer repeats the job it names).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from melissa_trainer import Launcher, LauncherError, LauncherTuning, make_sampler


def _failure(launch: Launcher, timeout: float = 20.0) -> LauncherError:
    """The `LauncherError` that `check()` raises once the study failed (polled: the
    launcher's thread sets it; there is no event to wait on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launch.check()
        except LauncherError as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError(f"the study did not fail within {timeout} s")


@pytest.mark.timeout(60)
def test_a_missing_program_is_named_once_with_the_fix(tmp_path: Path) -> None:
    launch = Launcher(
        ["pythn3-no-such-program", "solver.py"],
        make_sampler("uniform", {"x": (0.0, 1.0)}, seed=0),
        n_simulations=1,
        job_limit=1,
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(max_restarts=0, poll_interval=0.02),
    )
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(_failure(launch))
    finally:
        launch.stop()
    assert "could not start job sim-0" in message
    assert message.count("sim-0") == 1, message  # the job named once
    assert message.count("['pythn3-no-such-program', 'solver.py']") == 1, message
    assert "'pythn3-no-such-program'" in message  # the program named
    assert "full path" in message and "sys.executable" in message, message  # the fix
