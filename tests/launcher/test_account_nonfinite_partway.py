"""Simulations whose solver turns NaN part-way (some samples finite, then refused under
``nonfinite="refuse"``) get a line of their own in the study's account, a WARNING: how
many, the share of their samples refused, from which time step each turned. A user
trial's solver sent NaN from step 5 of 20 in each of its 4 simulations: 60 of its 80
samples were refused, and the account said "4 contributed samples; every one
contributed." at INFO (they had contributed 5 each, so none was listed)."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path

import pytest
from study_runs import study_to_its_end

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.launcher.backends.local import LocalBackend

#: sends 8 steps; from the step its parameter `nan_from` names on (if below 8) the field
#: is NaN: the test's oracle for which steps are refused
SOLVER = r"""
import numpy as np
from melissa_trainer.client import Client

with Client({"u": ((4,), "float32")}) as client:
    nan_from = client.parameters["nan_from"]
    for t in range(8):
        u = np.full(4, t, np.float32)
        if t >= nan_from:
            u[:] = np.nan
        client.send(t, u=u)
"""

STEPS = 8


def run_study(tmp_path: Path, nan_from: list[float]) -> None:
    """Run a study of one simulation per `nan_from` value (8 steps each) to its end on
    one rank (its account logged as it stops)."""
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py")],
        [{"nan_from": v} for v in nan_from],
        len(nan_from),
        job_limit=2,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    study_to_its_end(launch, tmp_path / "rdv")


@pytest.mark.e2e
@pytest.mark.skipif(sys.platform != "linux", reason="uses PDEATHSIG")
@pytest.mark.timeout(150)
def test_simulations_that_turn_nan_part_way_are_named_with_their_share_and_first_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    # simulation 1 turns NaN at step 3, simulation 3 at step 5; 0 and 2 never
    run_study(tmp_path, [99, 3, 99, 5])
    records = [r for r in caplog.records if r.getMessage().startswith("study account")]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING  # (was INFO: "every one contributed")
    lines = records[0].getMessage().splitlines()
    assert lines[0] == (
        "study account: 4 simulations ended, 4 contributed samples; 2 (50% of the study) "
        "turned NaN or Inf part-way:"
    ), lines
    refused = (STEPS - 3) + (STEPS - 5)  # the solver's own count: 5 + 3 of 16
    assert lines[1].startswith(
        "  2 turned NaN or Inf part-way (their samples from then on refused, "
        f"nonfinite='refuse'): {refused} of their {2 * STEPS} samples refused (50%), "
        "from time step 3 (simulation 1), 5 (simulation 3); e.g. simulation 1, "
        "parameters {'nan_from': 3"
    ), lines
    assert len(lines) == 2  # 8 of the study's 32 samples: not "most of them"
    assert "every one contributed" not in records[0].getMessage()


def finished(sid: int) -> SimulationOutcome:
    return SimulationOutcome(sid, "finished", (0,), "", {"c": sid / 10})


def test_the_trials_study_says_most_samples_were_refused_and_that_it_still_exits_0() -> None:
    """The trial's figures: 4 simulations of 20 steps, each NaN from step 5 on."""
    lines, warn = study_account(
        [finished(s) for s in range(4)],
        {s: (20, 15) for s in range(4)},
        4,
        {s: 5 for s in range(4)},
    )
    assert warn
    assert lines[0].endswith("4 (100% of the study) turned NaN or Inf part-way:")
    assert (
        "60 of their 80 samples refused (75%), from time step 5 (simulations 0, 1, 2, 3)"
        in (lines[1])
    )
    assert lines[2].startswith(
        "  most of the study's samples were refused as NaN or Inf: 60 of 80 (75%), so "
        "training had 20. The run goes on and exits 0 all the same"
    )
    assert "ReceiverConfig(nonfinite='fail')" in lines[2]
    assert len(lines) == 3


def test_one_simulation_part_way_reads_in_the_singular_and_beside_those_that_sent_none() -> None:
    outcomes = [finished(0), finished(1), finished(2)]
    # 0: all refused (contributed none); 1: refused from step 7, its first unknown to the
    # account for 2 (no first step given): left out of "from time step"
    lines, warn = study_account(outcomes, {0: (4, 4), 1: (10, 3), 2: (10, 0)}, 3, {1: 7})
    assert warn
    assert lines[0].endswith("1 (33% of the study) contributed none:")
    assert lines[1].startswith("  1 sent only NaN or Inf")
    assert lines[2].startswith(
        "  1 turned NaN or Inf part-way (their samples from then on refused, "
        "nonfinite='refuse'): 3 of its 10 samples refused (30%), from time step 7 "
        "(simulation 1): simulation 1, parameters {'c': 0.1}."
    ), lines
    assert "for its parameters" in lines[2]
    assert len(lines) == 3  # 7 of 24 refused: not most
    lines, _ = study_account(outcomes[1:], {1: (10, 3), 2: (10, 0)})
    assert ", from time step" not in lines[1]  # (no first step known: not said)
