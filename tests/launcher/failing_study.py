"""The sampler-replacement tests' study: a box of 6 parameters, a solver that fails for
good wherever p0 > 0.8, and what the tests count and compute about what the samplers
draw in place of simulations given up (test_breed_replacements.py,
test_density_replacements.py).

Imported by name (pytest's prepend import mode puts tests/launcher/ on `sys.path` for the
test files beside it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning, Sampler
from melissa_trainer.launcher import exploration as exploration_module

__all__ = ["BOX", "FAILING", "N", "designs_optimised", "failing_launcher", "rows", "study",
           "wait_done"]  # fmt: skip

#: six parameters, each in [0, 1]: above 3 varying parameters, "auto" explorers are "lhs"
BOX = {f"p{i}": (0.0, 1.0) for i in range(6)}
#: the simulations a whole-study test plans
N = 12
#: the solver: fails (exit 1) wherever p0 > 0.8, a fifth of the box
FAILING = [
    sys.executable,
    "-c",
    "import json, os, sys; p = json.loads(os.environ['MELISSA_TRAINER_PARAMETERS']); "
    "sys.exit(1 if p['p0'] > 0.8 else 0)",
]


def designs_optimised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one per optimised design the samplers compute. The
    process's design memo is emptied first: a design an earlier test computed would
    otherwise come from it uncounted."""
    exploration_module._lhs_design.cache_clear()
    made: list[int] = []
    engine = exploration_module.qmc_engine

    def counting(name: str, d: int, seed: Any, **options: Any) -> Any:
        if options.get("optimization"):
            made.append(d)
        return engine(name, d, seed, **options)

    monkeypatch.setattr(exploration_module, "qmc_engine", counting)
    return made


def rows(draws: list[dict[str, float]]) -> np.ndarray:
    """`draws` as an array, a row a draw, the columns in `BOX`'s order."""
    return np.array([[p[k] for k in BOX] for p in draws])


def study(sampler: Any, start: int, stop: int, made: list[Any]) -> None:
    """Draws `start` to `stop` from `sampler` onto `made`, telling it (`failed`) of those
    with p0 > 0.7, as the launcher tells it of the simulations given up."""
    for _ in range(start, stop):
        p = sampler.draw()
        made.append(p)
        if p["p0"] > 0.7:
            sampler.failed(len(made) - 1, p)


def failing_launcher(sampler: Sampler, tmp_path: Path) -> Launcher:
    """A `Launcher` (not started) of `N` simulations of `FAILING` drawn by `sampler`, one
    job at a time (each draw follows the end of the one before), none restarted, its
    logs under `tmp_path`."""
    return Launcher(FAILING, sampler, N, job_limit=1, log_dir=tmp_path / "logs",
                    tuning=LauncherTuning(max_restarts=0, poll_interval=0.01))  # fmt: skip


def wait_done(launcher: Launcher, timeout: float = 150.0) -> None:
    """Return once `launcher`'s study is done (its `check` called meanwhile, as its
    thread would); fail past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not launcher.done:  # (the condition polled, as the launcher tests do)
        launcher.check()
        assert time.monotonic() < deadline, "the study did not complete"
        time.sleep(0.02)
