"""A study of two ranks under ``nonfinite="fail"``: rank 0's receiver fails a simulation
that sent NaN, rank 0's launcher kills it, and rank 1's receiver, which had the killed
attempt's other connection, says that close in one INFO line naming rank 0's failure
(`stream.nonfinite_kills`), not the paragraph of a lost connection ("its connection
closed before its BYE: the process ended without it ... that data is lost"), which a
user read as a second, unexplained failure.

Real parts, as in tests/stream/test_nonfinite_handoff_study.py (`two_rank_study`): a
real launcher and its solver with the real client on rank 0, a real receiver of rank 1.
The in-process variant, with raw sockets: tests/stream/test_nonfinite_kill_other_rank.py.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from nonfinite_runs import restarting_launcher, two_rank_study, wait_study_end
from waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="uses PDEATHSIG"),
]

#: its first attempt sends steps 0 (to rank 0) and 1 (to rank 1), waits until rank 1
#: has step 1 (the test's GO file: rank 1 read its HELLO before rank 0 fails it), sends
#: NaN as step 2 (to rank 0, which fails it), then waits to be killed; its restart sends
#: 4 finite steps and closes
SOLVER = r"""
import os, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client, ClientTuning

attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
go = Path(os.environ["GO_FILE"])
with Client({"u": ((4,), "float32")}, tuning=ClientTuning(batch_bytes=0)) as client:
    for t in range(4):
        if attempt == 0 and t == 2:
            while not go.exists():
                time.sleep(0.01)
        u = np.full(4, t, np.float32)
        if attempt == 0 and t == 2:
            u[:] = np.nan
        client.send(t, u=u)
        if attempt == 0 and t == 2:
            time.sleep(120)  # still running when the launcher hears of its NaN: killed
"""

LOGGER = "melissa_trainer.stream.receiver"


@pytest.mark.timeout(180)
def test_rank_1_says_the_launchers_kill_of_a_simulation_rank_0_failed_for_nan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    go = tmp_path / "go"
    launch = restarting_launcher(tmp_path, SOLVER, [{"x": 0.5}], env={"GO_FILE": str(go)})
    with two_rank_study(launch, tmp_path / "rdv") as rank1:
        wait_until(lambda: rank1.activity().get(0, 0) >= 1, "rank 1's step 1", 90.0)
        go.write_text("")  # rank 1 has the first attempt's HELLO: now its NaN
        wait_study_end(launch, 90.0)
        # the kill's close, and steps 1 and 3 of the restart (step 1 a duplicate)
        wait_until(lambda: rank1.telemetry()["connections_lost"] == 1, "its close", 60.0)
        wait_until(lambda: rank1.telemetry()["samples_put"] == 2, "step 3", 60.0)
    # the oracle: attempt 0 was killed (its exit "refused"), attempt 1 finished
    (outcome,) = launch.outcomes()
    assert (outcome.status, list(outcome.exit_codes)) == ("finished", ["refused", 0])
    said = [
        (r.levelno, r.getMessage()) for r in caplog.records if "before its BYE" in r.getMessage()
    ]
    line = (
        "simulation 0 client rank 0: connection closed before its BYE: killed by the "
        "launcher, {} having failed it for NaN or Inf (nonfinite='fail') (receiver of rank {})"
    )
    expected = [
        (logging.INFO, line.format("this receiver", 0)),
        (logging.INFO, line.format("rank 0's receiver", 1)),
    ]
    assert sorted(said) == sorted(expected), said
