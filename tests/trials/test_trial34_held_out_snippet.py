"""Severity MEDIUM. User trial htrial34 (a new user wiring a slow solver of their own).

What the user did: copied the held-out simulations' snippet of
docs/how-to/own-solver.md ("Held-out simulations: the error's mean and its tails") to
validate on 8 simulations never trained on.

What happened: the snippet made ``make_sampler("uniform", bounds, seed=123)`` inside its
generator, a new sampler for each draw: its 8 held-out simulations all had the same
parameters, so ``eval_loss_p99`` and ``eval_loss_max`` were those of one simulation.

What was expected: 8 distinct parameter sets. Fixed in the page (the sampler made once);
this test runs the page's snippet as printed, with stand-ins for the user's solver and
trainer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melissa_trainer import make_sampler

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "own-solver.md"


def snippet(page: str) -> str:
    """The page's Python block that builds `held_out`."""
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    found = [b for b in blocks if b.startswith("held_out = []")]
    assert len(found) == 1, "the page's held-out snippet (a block starting 'held_out = []')"
    return found[0]


@pytest.mark.timeout(60)
def test_the_held_out_snippet_draws_distinct_simulations() -> None:
    made: dict[str, Any] = {}

    def run_my_solver(parameters: dict[str, float]) -> list[np.ndarray]:
        return [np.full(4, parameters["k"], np.float32) for _ in range(3)]

    def online_trainer(*args: Any, eval_dataset: list[dict[str, Any]]) -> None:
        made["eval_dataset"] = eval_dataset

    code = snippet(PAGE.read_text()).replace("OnlineTrainer(...,", "OnlineTrainer(")
    scope = {
        "np": np,
        "make_sampler": make_sampler,
        "bounds": {"k": (0.1, 1.0), "t0": (100.0, 500.0)},
        "run_my_solver": run_my_solver,
        "OnlineTrainer": online_trainer,
    }
    exec(compile(code, str(PAGE), "exec"), scope)
    held_out = made["eval_dataset"]
    by_simulation = {s["simulation_id"]: tuple(s["parameters"]) for s in held_out}
    assert len(by_simulation) == 8
    assert len(set(by_simulation.values())) == 8, by_simulation  # 8 distinct simulations
