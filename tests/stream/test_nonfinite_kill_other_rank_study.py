"""A study of two ranks under ``nonfinite="fail"``: rank 0's receiver fails a simulation
that sent NaN, rank 0's launcher kills it, and rank 1's receiver, which had the killed
attempt's other connection, says that close in one INFO line naming rank 0's failure
(`stream.nonfinite_kills`), not the paragraph of a lost connection ("its connection
closed before its BYE: the process ended without it ... that data is lost"), which a
user read as a second, unexplained failure.

Real parts: rank 0 a `Study` with a real launcher (local backend), its solver a
subprocess with the real client, which reads both ranks' endpoints in the rendezvous
directory and sends step t to rank t % 2; rank 1 a real receiver of rank 1 of 2 (the
same process: the ranks share nothing but the rendezvous directory and the sockets).
The in-process variant, with raw sockets: tests/stream/test_nonfinite_kill_other_rank.py.
"""

from __future__ import annotations

import logging
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import running
from waiting import wait_until

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import ReceiverConfig

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
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    go = tmp_path / "go"
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py")],
        [{"x": 0.5}],
        1,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=1),
        env={"GO_FILE": str(go)},
    )
    rdv = tmp_path / "rdv"
    rdv.mkdir()
    config = ReceiverConfig(rendezvous_dir=rdv, nonfinite="fail")
    with running(FIFOBuffer(100), 1, 2, rendezvous_dir=rdv, nonfinite="fail") as rank1:
        source = Study(launch, StreamSource(config))
        source.start(FIFOBuffer(100), 0, 2)
        try:
            source.on_all_ranks_started()
            wait_until(lambda: rank1.activity().get(0, 0) >= 1, "rank 1's step 1", 90.0)
            go.write_text("")  # rank 1 has the first attempt's HELLO: now its NaN
            deadline = time.monotonic() + 90
            while not (launch.check() is None and launch.done):
                assert time.monotonic() < deadline, "the study did not end"
                time.sleep(0.02)
            # the kill's close, and steps 1 and 3 of the restart (step 1 a duplicate)
            wait_until(lambda: rank1.telemetry()["connections_lost"] == 1, "its close", 60.0)
            wait_until(lambda: rank1.telemetry()["samples_put"] == 2, "step 3", 60.0)
        finally:
            source.stop()
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
