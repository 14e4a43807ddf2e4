"""On every rank, the simulations a study kills at its own stop are summarised, not warned
of as data lost; a solver that dies on its own mid-study is still warned of on every rank.

Every rank hears the kills (each simulation's client connects to every rank's receiver),
but only rank 0 runs the launcher, and rank 1 may reach its own `Study.stop` after rank
0 has killed the solvers (here: its `on_preempted` hook takes its time, as an upload of
the checkpoint would). Before the fix rank 1 warned of each kill ("its connection closed
before its BYE ... that data is lost": 3 warnings, no summary); rank 0 now says it in
the rendezvous directory before its kills (`stream.connections`).

Two real ranks (``accelerate launch``, gloo on CPU), real solvers (one restarted, slow to
die: it ignores SIGTERM); the choreography is tests/scripts/study_stop_ranks.py's. The
oracle is each rank's receiver log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from melissa_trainer.stream.study_stops import (
    announce_study_stops,
    study_stops_announced,
)
from melissa_trainer.study.launch import receiver_notices

SCRIPT = Path(__file__).parents[1] / "scripts" / "study_stop_ranks.py"
N = 3  # (the script's)

# Steps 0 and 1 (one to each rank), then blocked until killed: the launcher's SIGTERM
# ends it without its BYE. A restarted one ignores SIGTERM: slow to die (`kill_grace`),
# and gets further, to steps 2 and 3: its receivers hold its steps 0 and 1, which it
# skips (HELD, docs/protocol.md section 17; its first send, step 0, goes out as a sign
# of life), so each rank has DATA of the restart only from a step its first run lacked.
# Its pid file is written before its client opens: there once the receivers have its
# HELLO (rank 0 kills simulation 0's first attempt by it). Simulation 0's step 1 leaves
# its client's batch 1 s after its step 0 (`batch_delay`: 20 ms by default, more on a
# loaded machine): a kill after its HELLO and before that step reached rank 1 hung the
# run (the script's docstring); each run has that window open, and must not kill in it.
SOLVER = r"""
import json, os, signal, threading
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client, ClientTuning

a = int(json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"])
pids = Path(os.environ["PID_DIR"])
restarted = any(p.name.startswith(f"{a}.") for p in pids.iterdir())
if restarted:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
(pids / f"{a}.{os.getpid()}").write_text("")
tuning = ClientTuning(batch_delay=1.0 if a == 0 else 0.02)
with Client({"x": ((3,), "float32")}, tuning=tuning) as client:
    for t in (0, 1, 2, 3) if restarted else (0, 1):
        client.send(t, x=np.array([a, t, 0.0], np.float32))
    threading.Event().wait()  # in flight until killed
"""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
@pytest.mark.timeout(360)
def test_no_rank_warns_of_the_study_kills_every_rank_of_a_solver_dead_mid_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    out, pids = tmp_path / "out", tmp_path / "pids"
    pids.mkdir()
    solver = tmp_path / "solver.py"
    solver.write_text(SOLVER)
    try:
        done = launch_two_ranks(SCRIPT, str(out), str(solver), str(pids), timeout=300)
    finally:  # (none should be left: the launcher kills them; a failed run may not)
        for pid in pids.iterdir():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid.suffix[1:]), signal.SIGKILL)
    text = done.stdout + done.stderr
    for rank in (0, 1):  # (the preemption, agreed by both ranks)
        assert f"rank {rank} stopped at step" in text, text[-6000:]
    for rank in (0, 1):
        log = out / f"log_{rank}.json"
        assert log.exists(), (rank, text[-6000:])  # (a rank that did not end its train())
        record = json.loads(log.read_text())
        lines = [message for _, message in record["lines"]]
        warned = [m for lv, m in record["lines"] if lv >= 30 and "before its BYE" in m]
        # the solver SIGKILLed mid-study, on both ranks; none of the study's kills
        assert len(warned) == 1, (rank, warned)
        assert warned[0].startswith("simulation 0 client rank 0: its connection closed"), warned
        summary = [m for m in lines if "killed as the study stopped" in m]
        assert len(summary) == 1, (rank, lines)
        assert summary[0].startswith(f"{N} simulations (0, 1, 2) killed"), summary
        # the restart skipped the step this rank held of its first run (HELD: one)
        assert record["rerun_held"] == 1, (rank, record["rerun_held"])
    # rank 1 read the kills before its own stop (else the test proves nothing)
    waited = json.loads((out / "log_1.json").read_text())["waited"]
    assert waited == "every close counted", waited


def test_an_earlier_runs_word_is_cleared_before_the_study_launches(tmp_path: Path) -> None:
    """A study outside a trainer has no run id to tell its word from an earlier run's in
    the same rendezvous directory: rank 0 removes that before it launches anything
    (`receiver_notices`), else every close of the new run would pass as the study's."""
    announce_study_stops(tmp_path, None)
    assert study_stops_announced(tmp_path, None)
    receiver_notices(tmp_path)
    assert not study_stops_announced(tmp_path, None)
    announce_study_stops(tmp_path, "r2")
    assert study_stops_announced(tmp_path, "r2") and not study_stops_announced(tmp_path, "r1")
