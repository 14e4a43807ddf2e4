"""A node lost (both ranks of `accelerate launch` SIGKILLed) in a run that checkpoints by
the wall clock alone (``--save_seconds``, no ``--save_steps``): the resume finds a
timed checkpoint, and every (simulation, time step) is trained on exactly once.

Before `save_seconds`, such a run (``save_steps`` unset, the default) had no checkpoint
to resume from: the resume started afresh and ran everything again.

Nothing here depends on how many saves the clock made: the assertions read what the
checkpoints say (each one's step, every rank's samples at it) and the lineage. The kill
point is reached whatever the machine's pace: each paced step sleeps 0.12 s, so the
clock's 0.3 s are up by the third step, and the request is agreed within two windows
(``--stop_sync_steps 2``): a checkpoint exists by step 7 of the run's 30.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_crash_resume import BATCH, SIMULATIONS, SOLVERS_GONE, Run, checkpoints, solvers_alive
from waiting import wait_until

from melissa_trainer.common.checkpoint_names import latest_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]

STEPS = 40  # time steps per simulation: 6 * 40 / 4 / 2 ranks = 30 steps
TIMED = ("--time_steps", str(STEPS), "--save_steps", "none", "--save_seconds", "0.3")


def newest_step_trained(run: Run) -> int:
    return max((step for step, _ in run.steps()), default=0)


def check_checkpoints_agree(out: Path) -> list[int]:
    """Every checkpoint left is of one step on both ranks: its state's step is its
    name's, and each rank had trained that many full batches when it was written."""
    saved = checkpoints(out)
    for step in saved:
        path = out / "checkpoints" / f"checkpoint-{step}"
        state = json.loads((path / "trainer_state.json").read_text())
        seen = [
            json.loads((path / f"rank_{r}" / "trainer_rank.json").read_text())["samples_seen"]
            for r in (0, 1)
        ]
        assert state["global_step"] == step, (step, state["global_step"])
        assert seen == [step * BATCH, step * BATCH], (step, seen)
        assert state["total_samples_seen"] == sum(seen)
    return saved


@pytest.mark.timeout(300)
def test_two_ranks_sigkilled_resume_from_a_timed_checkpoint_exactly_once(tmp_path: Path) -> None:
    first = Run(tmp_path, "first", *TIMED, ranks=2)
    try:
        wait_until(
            lambda: (
                checkpoints(first.out)
                and newest_step_trained(first) >= checkpoints(first.out)[-1] + 2
            ),
            lambda: f"a timed checkpoint and 2 steps past it: {first.output()}",
            180,
            procs=[first.proc],
            interval=0.02,
        )
        first.kill()
    finally:
        first.wait(30)
    wait_until(lambda: not solvers_alive(first.out), SOLVERS_GONE, 60, interval=0.1)
    saved = check_checkpoints_agree(first.out)
    resumed_from = latest_checkpoint(first.out / "checkpoints")
    assert resumed_from is not None and int(resumed_from.name.split("-")[1]) == saved[-1]
    at = saved[-1]
    assert at < newest_step_trained(first)  # the kill lost steps: the resume runs them again

    second = Run(tmp_path, "second", *TIMED, "--resume_from_checkpoint", "latest", ranks=2,
                 paced=False)  # fmt: skip
    assert second.wait(240) == 0, second.output()
    check_checkpoints_agree(second.out)  # the resumed run's (its end's included)
    before = [keys for step, keys in first.steps() if step <= at]
    after = [keys for _, keys in second.steps()]
    assert all(step > at for step, _ in second.steps())
    lineage = [k for keys in before + after for k in keys]
    expected = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
    assert sorted(lineage) == sorted(expected), at  # each exactly once
