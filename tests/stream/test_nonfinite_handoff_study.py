"""A study of two ranks under ``nonfinite="fail"`` whose simulation sends NaN only to
rank 1: rank 1's receiver used to stop the training (`NonFiniteDataError`: no launcher
reads its failures); it now hands the failure to rank 0's (`stream.nonfinite_handoff`),
whose launcher kills the simulation and applies its failure policy (here: a restart) as
for a NaN sent to rank 0, and training goes on: the other simulation's samples, and the
restart's, all arrive on rank 1.

Real parts: rank 0 a `Study` with a real launcher (local backend), its solver a
subprocess with the real client, which reads both ranks' endpoints in the rendezvous
directory and sends step t to rank t % 2; rank 1 a real receiver of rank 1 of 2 (the
same process: the ranks share nothing but the rendezvous directory and the sockets).
The in-process variant, with raw sockets: tests/stream/test_nonfinite_handoff.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from nonfinite_runs import restarting_launcher, two_rank_study, wait_study_end
from waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="uses PDEATHSIG"),
]

#: simulation 0's first attempt sends step 0 (to rank 0), then NaN as step 1 (to rank
#: 1 only), then waits to be killed; every other attempt, and simulation 1, sends 4
#: finite steps and closes
SOLVER = r"""
import os, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning

first = os.environ["MELISSA_TRAINER_SIMULATION_ID"] == "0" and os.environ[
    "MELISSA_TRAINER_ATTEMPT"] == "0"
with Client({"u": ((4,), "float32")}, tuning=ClientTuning(batch_bytes=0)) as client:
    for t in range(4):
        u = np.full(4, t, np.float32)
        if first and t == 1:
            u[:] = np.nan
        client.send(t, u=u)
        if first and t == 1:
            time.sleep(120)  # still running when the launcher hears of its NaN: killed
"""


@pytest.mark.timeout(180)
def test_a_nan_sent_only_to_rank_1_fails_the_simulation_and_training_goes_on(
    tmp_path: Path,
) -> None:
    launch = restarting_launcher(tmp_path, SOLVER, [{"x": 0.5}, {"x": 0.7}])
    with two_rank_study(launch, tmp_path / "rdv") as rank1:
        # (rank 1 used to fail here: NonFiniteDataError)
        wait_study_end(launch, 120.0, rank1.check)
        # rank 1's share: steps 1 and 3 of simulation 1 and of the restart
        wait_until(lambda: rank1.telemetry()["samples_put"] == 4, "rank 1's samples", 60.0)
        rank1.check()
        assert rank1.telemetry()["nonfinite_refused"] == 1
    # the oracle: simulation 0's first attempt was killed for its NaN (its exit
    # "refused", once), its restart finished; simulation 1 finished untouched
    outcomes = {o.simulation_id: o for o in launch.outcomes()}
    assert (outcomes[0].status, list(outcomes[0].exit_codes)) == ("finished", ["refused", 0])
    assert (outcomes[1].status, list(outcomes[1].exit_codes)) == ("finished", [0])
