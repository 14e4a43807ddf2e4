"""Under ``nonfinite="fail"`` the launcher kills a simulation on the receiver's report,
and the receiver then reads its connection closing before its BYE. That close was
warned of in the paragraph of causes and loss ("its connection closed before its BYE:
the process ended without it ... or it sent a message over 1074791424 bytes ..."),
which a user trial read as a second, unrelated problem. It is now said in one INFO line
naming the cause (and counted, as every close before a BYE is): a real study, its
solver a subprocess killed by a real launcher, its connection a real socket."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from nonfinite_runs import restarting_launcher
from study_runs import study_to_its_end

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="uses PDEATHSIG"),
]

#: its first attempt sends NaN from step 2 on, then waits to be killed (a solver that
#: runs on after its blow-up); its restart sends 4 finite steps and closes
SOLVER = r"""
import os, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning

attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
with Client({"u": ((4,), "float32")}, tuning=ClientTuning(batch_bytes=0)) as client:
    for t in range(4):
        u = np.full(4, t, np.float32)
        if attempt == 0 and t >= 2:
            u[:] = np.nan
        client.send(t, u=u)
    if attempt == 0:
        time.sleep(120)  # still running when the launcher hears of its NaN: killed
"""

LOGGER = "melissa_trainer.stream.receiver"


@pytest.mark.timeout(150)
def test_a_simulation_killed_for_nan_has_its_close_said_in_one_line_naming_that_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    launch = restarting_launcher(tmp_path, SOLVER, [{"x": 0.5}])
    end = study_to_its_end(launch, tmp_path / "rdv", nonfinite="fail")
    samples, telemetry = end.samples, end.telemetry
    # the oracle: attempt 0 was killed (its exit "refused"), attempt 1 sent all 4 steps
    (outcome,) = launch.outcomes()
    assert (outcome.status, list(outcome.exit_codes)) == ("finished", ["refused", 0])
    assert sorted(int(s["time_step"]) for s in samples) == [0, 1, 2, 3]
    assert telemetry["connections_lost"] == 1  # (counted, as before)
    said = [
        (r.levelno, r.getMessage()) for r in caplog.records if "before its BYE" in r.getMessage()
    ]
    assert said == [
        (
            logging.INFO,
            "simulation 0 client rank 0: connection closed before its BYE: killed by the "
            "launcher, this receiver having failed it for NaN or Inf (nonfinite='fail')",
        )
    ], said
