"""Severity MEDIUM. User trial htrial38 (two scientists sharing one node and one account).

What the users did: both ran a study of their own from the same directory, each with
its own ``--output_dir`` (so the trainers' lock on ``output_dir`` let both run), with
the same ``Launcher(..., log_dir="logs")`` in the script they shared (the API's
documented ``log_dir``: a relative path, read in the working directory).

What happened: the second study's start moved the first study's job logs, while its
jobs were running, to ``logs/previous-TIME/`` ("an earlier run's"), and its own jobs
then wrote ``logs/sim-0.log`` and the like: the first study's failure reports quote
``{log_dir}/sim-{id}.log``, the other study's simulation (another study's error,
blamed on this one), and both studies' restarts append to the same files.

What was expected: the second launcher refused at its start, naming the log folder in
use and the fix (another ``log_dir``, or none: ``{study_dir}/logs``), as a second
trainer on one ``output_dir`` is refused. Fixed: a launcher holds an exclusive flock on
the folder ``log_dir`` from its start to its stop (the kernel releases it when its
process dies, so a resume after ``kill -9`` is not refused; no file is added there).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from melissa_trainer import ConfigError, Launcher, LauncherTuning, make_sampler

# prints its study's name, then waits (the launcher's stop kills it)
_SOLVER = "import sys, time; print(sys.argv[1], flush=True); time.sleep(60)"


def _launcher(name: str, log_dir: Path) -> Launcher:
    return Launcher(
        [sys.executable, "-c", _SOLVER, name],
        make_sampler("uniform", {"x": (0.0, 1.0)}, seed=0),
        n_simulations=1,
        job_limit=1,
        log_dir=log_dir,
        tuning=LauncherTuning(max_restarts=0, poll_interval=0.02, simulation_timeout=60),
    )


def _wait_for_text(path: Path, text: str, timeout: float = 30.0) -> None:
    """Until `path` holds `text` (polled: a job's output has no event to wait on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not say {text!r} within {timeout} s")


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_second_study_on_a_log_dir_in_use_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    first, second = _launcher("study-A", logs), _launcher("study-B", logs)
    first.start(tmp_path / "a" / "rendezvous")
    try:
        _wait_for_text(logs / "sim-0.log", "study-A")
        with pytest.raises(ConfigError) as refused:
            second.start(tmp_path / "b" / "rendezvous")
        message = str(refused.value)
        assert str(logs) in message, message  # the folder named
        assert "log_dir" in message, message  # and the fix
        # the first study's log is where its reports look, and holds its own job only
        assert list(logs.glob("previous-*")) == []
        assert "study-B" not in (logs / "sim-0.log").read_text()
        assert sorted(p.name for p in logs.iterdir()) == ["sim-0.log"]  # nothing added
    finally:
        second.stop()
        first.stop()
    # stopped: the folder is free again (a later study of the same user starts)
    third = _launcher("study-C", logs)
    third.start(tmp_path / "c" / "rendezvous")
    third.stop()
