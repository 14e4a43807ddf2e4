"""A user's adaptive study (the surrogate acquisition, the high-loss density) SIGKILLed
while its simulations run, then resumed from `latest`: it completes, every (simulation,
step) is trained on exactly once in the lineage of the final state, each simulation
keeps the one parameter vector it was drawn with, and the resumed study's sampler goes
on adapting (its account counts adaptive draws, the ones made before the kill included).

`test_crash_resume.py` checks the same lineage with Breed only (whose draws, in that
test, explore); the acquisition and the density keep more in their checkpointed state
(the draws remembered, the predictor's observations, the design), which this test
takes through a kill and a resume with draws that adapt.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from test_crash_resume import (
    BATCH,
    SOLVERS_GONE,
    STEPS,
    Run,
    checkpoints,
    one_parameter_vector_per_simulation,
    solvers_alive,
)
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

#: more simulations than the samplers' `min_observations` (8): draws 9-14 can adapt
SIMULATIONS = 14
#: the losses reach the sampler every 2 steps, so that the draws after the 8th hold them
ADAPTIVE = ("--num_simulations", str(SIMULATIONS), "--simulation_loss_steps", "2")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("sampler", ["surrogate", "density"])
def test_adaptive_study_sigkilled_then_resumed_trains_every_step_once(
    tmp_path: Path, sampler: str
) -> None:
    extra = ("--sampler", sampler, *ADAPTIVE)
    first = Run(tmp_path, "first", *extra)
    try:
        # killed past a checkpoint, with simulations still running (draws left to make)
        wait_until(
            lambda: bool(checkpoints(first.out)) and bool(solvers_alive(first.out))
            and len(list((first.out / "study" / "logs").glob("sim-*.log"))) >= 10,
            lambda: first.output(),
            300,
            procs=[first.proc],
            interval=0.05,
        )  # fmt: skip
        first.kill()
    finally:
        first.wait(30)
    wait_until(lambda: not solvers_alive(first.out), SOLVERS_GONE, 60, interval=0.1)

    resumed_from = latest_checkpoint(first.out / "checkpoints")
    assert resumed_from is not None
    saved = int(resumed_from.name.split("-")[1])
    second = Run(tmp_path, "second", "--resume_from_checkpoint", "latest", *extra, paced=False)
    code = second.wait(300)
    assert code == 0, second.output()

    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for _, keys in second.steps()]
    lineage = collections.Counter(k for keys in before + after for k in keys)
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    twice = {k: n for k, n in lineage.items() if n > 1}
    assert not twice and set(lineage) == expected, (saved, sorted(twice)[:10])
    assert all(len(keys) == BATCH for keys in before + after)
    one_parameter_vector_per_simulation(first, second)
    summary = json.loads([line for line in second.output().splitlines() if line[:1] == "{"][-1])
    assert summary["samples_received"] == SIMULATIONS * STEPS
    account = summary["sampler"]
    assert account is not None and account["adaptive_draws"] > 0, account
