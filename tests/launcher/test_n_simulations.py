"""`Launcher(n_simulations=0)` is refused before anything starts, as `job_limit=0` is:
it used to run, train nothing and exit 0 with a checkpoint-0, silently."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from melissa_trainer.launcher import Launcher, make_sampler

BOUNDS = {"a": (0.0, 1.0)}


@pytest.mark.parametrize("n", [0, -1, True, 2.0])
def test_a_study_of_no_simulation_is_refused_naming_the_fix(n: Any) -> None:
    with pytest.raises(ValueError, match=r"n_simulations must be an int >= 1 \(.*give 1 or more"):
        Launcher([sys.executable, "-c", "pass"], make_sampler("lhs", BOUNDS), n_simulations=n)


def test_one_simulation_is_accepted() -> None:
    launcher = Launcher([sys.executable, "-c", "pass"], make_sampler("lhs", BOUNDS), 1)
    assert launcher.n_simulations == 1
