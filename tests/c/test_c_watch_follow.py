"""A C solver that follows a restarted trainer asks the trainer it follows whether it
took the simulation (clients/c/src/follow.c starts the watch again once its HELLO left:
admission_watch.c), as the Python client does (tests/client/test_watch_follow.py):
trainer A takes it; B, started in the same rendezvous, streams another study and
refuses the HELLO the solver sends it when it follows; an `mt_send` then returns
`MT_ESIMREFUSED` naming B's receiver and the field. Before, the watch was released with
A's transport and never asked B: every send returned `MT_OK` until the close."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running
from test_c_admission_watch import FLOAT32, MT_ESIMREFUSED, STUDY, refused_here, solver
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

OTHER = {"v": ((4,), np.float32)}
#: seconds of sends the solver gets to follow B (it looks at the rendezvous once a
#: second: follow.c CHECK_INTERVAL) and be told (the watch's answer within 10 ms)
BOUND = 60.0


def test_a_c_solver_following_a_trainer_that_refuses_it_is_told_at_a_send(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rv"
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv)}
    with ExitStack() as stack:
        room = FIFOBuffer(1000)
        a = stack.enter_context(running(room, rendezvous_dir=rv, fields=STUDY, run_id="run-a"))
        s = stack.enter_context(solver(script_exe, tmp_path, 6, "u", **env))
        for t in range(3):
            assert s.do(f"send {t} u {FLOAT32} 4 {t}") == (0, "")
        assert s.do("flush") == (0, "")
        wait_until(lambda: room.stats().put == 3, "A's samples", procs=[s.proc])
        a.stop()  # (A took it; B, of another study, in its place)
        b = stack.enter_context(running(rendezvous_dir=rv, fields=OTHER, run_id="run-b"))
        t, status, told = 3, 0, ""
        deadline = time.monotonic() + BOUND
        while status == 0 and time.monotonic() < deadline:
            status, told = s.do(f"send {t} u {FLOAT32} 4 {t}")
            t += 1
        wait_until(refused_here(b, 6), "B's refusal", procs=[s.proc])
        closed = s.do("close")
    said = (tmp_path / "stderr_6.txt").read_text()
    assert "followed the restarted trainer (run run-b" in said, said
    assert status == MT_ESIMREFUSED, (t, status, told)  # (before: 0 for BOUND seconds)
    assert "simulation 6: the trainer's receiver 0 (tcp://" in told, told
    assert "field 'u' is not one of the study's" in told, told
    assert closed[0] == MT_ESIMREFUSED, closed
