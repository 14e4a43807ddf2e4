"""The launcher account tests' studies that fail: a real `Launcher` of a small study on
the local backend whose solver is a ``python -c`` line, and the wait for its failure
(test_account_buckets.py, test_account_policy.py, test_account_words_counts.py,
test_account_words_fates.py, test_startup_allowance.py).

Imported by name (pytest's prepend import mode puts tests/launcher/ on `sys.path` for the
test files beside it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.reports import LauncherError

__all__ = ["exits_3", "failure", "launcher_of", "run_until_failed"]


def exits_3(failing: set[int]) -> str:
    """A ``python -c`` solver: exit 3 if its simulation id is in `failing`, else 0."""
    return (
        "import os, sys; "
        f"sys.exit(3 if int(os.environ['MELISSA_TRAINER_SIMULATION_ID']) in {sorted(failing)} "
        "else 0)"
    )


def launcher_of(
    code: str,
    n: int,
    *,
    job_limit: int = 1,
    log_dir: Path | None = None,
    poll_interval: float = 0.02,
    **tuning: Any,
) -> Launcher:
    """A `Launcher` (not started) of `n` simulations of ``python -c code`` on the local
    backend, each drawn as ``x`` uniform in [0, 1] (seed 0), `job_limit` at a time, its
    logs under `log_dir` (None: the launcher's default); none restarted, no check of
    systematic failures, a 2 s kill grace, polled every `poll_interval` s. `tuning`: the
    other `LauncherTuning` fields (``on_failure``, ``max_redraws``, ...)."""
    settings = LauncherTuning(
        poll_interval=poll_interval, kill_grace=2.0, max_restarts=0, systematic_failures=None,
        **tuning,
    )  # fmt: skip
    return Launcher(
        [sys.executable, "-c", code], UniformSampler({"x": (0.0, 1.0)}, seed=0), n,
        job_limit=job_limit, backend=LocalBackend(), tuning=settings, log_dir=log_dir,
    )  # fmt: skip


def failure(
    launch: Launcher, timeout: float = 30.0, tick: Callable[[], None] | None = None
) -> LauncherError:
    """Wait up to `timeout` s for `launch`'s study (started) to fail; the `LauncherError`
    its `check()` raised. `tick`, if given, is called before each `check()`."""
    errors: list[LauncherError] = []

    def failed() -> bool:
        if tick is not None:
            tick()
        try:
            launch.check()
        except LauncherError as exc:
            errors.append(exc)
        return bool(errors)

    wait_until(failed, "the study to fail", timeout)
    return errors[0]


def run_until_failed(launch: Launcher, tmp_path: Path, timeout: float = 30.0) -> LauncherError:
    """Start `launch` (its rendezvous under `tmp_path`), wait up to `timeout` s for its
    study to fail, stop it (failed or not); the error its `check()` raised."""
    launch.start(tmp_path / "rendezvous")
    try:
        return failure(launch, timeout)
    finally:
        launch.stop()
