"""The simulations a study kills at its own stop are summarised, not warned of one by
one (a user trial: a preempted Navier-Stokes run ended with 11 WARNINGs "simulation N
client rank 0: its connection closed before its BYE ... that data is lost", one per
simulation the trainer itself had killed). `Study.stop` kills the running simulations
while the receiver still runs: each kill closed a connection before its BYE and was
judged as a lost connection. Their data is not lost in that sense: the launcher records
them unfinished, and a resume runs them again. A solver that dies on its own while the
study runs still gets its warning. Before the fix: 3 such warnings (1 + N - 1: the
simulations killed while the launcher waited on the last one), no summary.

Real processes: solvers that send one step, then block (never a BYE). The oracle is the
receiver's log: the count of "closed before its BYE" warnings and the one summary line."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from melissa_trainer import FIFOBuffer, Study
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

pytestmark = [
    pytest.mark.e2e,  # (real simulation processes)
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]

# One step, then blocked until killed: the launcher's SIGTERM ends it without its BYE.
# A restarted one ignores SIGTERM: the launcher, which kills it last (its newest job),
# waits `kill_grace` for it before its SIGKILL, while the receiver judges the closes of
# those killed before (the user's run: many solvers, each slow to die on a busy machine).
SOLVER = r"""
import json, os, signal, threading
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

a = int(json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"])
pids = Path(os.environ["PID_DIR"])
if any(p.name.startswith(f"{a}.") for p in pids.iterdir()):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with Client({"x": ((3,), "float32")}) as client:
    client.send(0, x=np.array([a, 0.0, 0.0], np.float32))
    (pids / f"{a}.{os.getpid()}").write_text("")
    threading.Event().wait()  # in flight until killed
"""

N = 3


class Log(logging.Handler):
    """The receiver's lines at INFO and above; `warned` is set at a warning about a
    connection closed before its BYE."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []
        self.warned = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.lines.append((record.levelno, message))
        if record.levelno >= logging.WARNING and "closed before its BYE" in message:
            self.warned.set()

    def lost_warnings(self) -> list[str]:
        return [m for lv, m in self.lines if lv >= logging.WARNING and "before its BYE" in m]


def wait_until(condition: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.timeout(180)
def test_simulations_killed_at_the_stop_are_summarised_one_killed_mid_study_warned(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script)],
        [{"a": float(i)} for i in range(N)],
        N,
        job_limit=N,
        backend=LocalBackend(),
        env={"PID_DIR": str(pids)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=3.0, max_restarts=3),
    )
    study = Study(launcher)
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    log, level = Log(), receiver_log.level
    receiver_log.addHandler(log)
    receiver_log.setLevel(logging.INFO)
    buffer = FIFOBuffer(64)
    try:
        study.configure(str(tmp_path / "out"))
        study.start(buffer, 0, 1)
        study.on_all_ranks_started()
        # every solver has sent its step (its HELLO read) and is blocked
        wait_until(lambda: len(list(pids.iterdir())) == N, "the solvers' first step")
        receiver = study.stream.receiver
        assert receiver is not None
        wait_until(lambda: len(receiver.waiting_for()) == N, "the HELLOs read")
        # a solver that dies on its own while the study runs: warned of, as before
        (first,) = [p for p in pids.iterdir() if p.name.startswith("0.")]
        os.kill(int(first.suffix[1:]), signal.SIGKILL)
        assert log.warned.wait(60), "the solver killed mid-study was not warned of"
        # its restart sends its step again (read: its HELLO too): all N in flight, then
        # the trainer's stop
        wait_until(lambda: receiver.activity().get(0) == 2, "simulation 0's restart")
        study.on_preempted()
    finally:
        study.stop()
        receiver_log.removeHandler(log)
        receiver_log.setLevel(level)
    warned = log.lost_warnings()
    assert len(warned) == 1, warned  # only the solver killed mid-study (before: 1 + N)
    assert warned[0].startswith("simulation 0 client rank 0: its connection closed")
    summary = [m for _, m in log.lines if "killed as the study stopped" in m]
    assert len(summary) == 1, log.lines
    assert f"{N} simulations" in summary[0] and "resume" in summary[0], summary
