"""A C solver whose send is blocked on a full queue when its trainer is killed follows the
resumed trainer from within that send (clients/c/src/send_wait.c), as the Python client
does: every (simulation, step) is trained on exactly once across both runs.

The moment is made exact, not timed (as test_external_resume_c.py's window test): the
trainer holds after checkpoint-2, the solver sends up to step MID and waits at a gate,
the trainer is killed, and only then does the solver go on: unbatched, with sndhwm 1 and
no receiver connected, its queue is full after a step or two, and its send blocks (the
solver says "sending T" before each). The resumed trainer is started once the solver
went on (it publishes seconds later: a Python process starting). Before the change the
send was never woken: the solver hung (`solver.wait` timed out). (Batched, its small
steps would wait in the outbox, not in a send: the close would follow.)"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from compiled import CClient, c_client  # noqa: F401 (a fixture)
from test_external_close import assert_trained_once
from test_external_resume_c import HELD_STEPS, MID, CStudy, c_solver, start_held
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGKILL"),
]


@pytest.mark.timeout(600)
def test_a_c_send_blocked_when_the_trainer_is_killed_follows_the_resumed_trainer(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    study = CStudy(tmp_path, c_solver(c_client, tmp_path), HELD_STEPS)
    try:
        held = start_held(study, tmp_path, SOLVER_MID=str(MID), SOLVER_SNDHWM="1",
                          SOLVER_UNBATCHED="1", SOLVER_SAY="1")  # fmt: skip
        first, solver, gates, hold, args, old_run = (
            held.first, held.solver, held.gates, held.hold, held.args, held.old_run)  # fmt: skip
        wait_until(lambda: (gates / "mid").exists(), "the solver at step MID", 180.0)
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        hold.unlink()
        (gates / "go2").touch()
        # (its queue holds a step or two: a send of the HELD_STEPS - MID left blocks; the
        # resumed trainer publishes seconds after, a Python process starting)
        wait_until(
            lambda: f"sending {MID}\n" in study.output("solver-0"), "the solver past its gate", 180
        )
        assert solver.poll() is None, study.output("solver-0")
        env = {**study.env, "LINEAGE_LOG": str(tmp_path / "resumed.lineage")}
        resumed = study._start("resumed", [*args, "--resume_from_checkpoint", "latest"], env)
        wait_until(lambda: study.run_id() not in (None, old_run), "the resumed trainer", 180.0)
        code = solver.wait(300)
        said = study.output("solver-0")
        assert code == 0, said[-3000:]
        assert "followed the restarted trainer" in said, said[-3000:]
        assert "closed 0" in said, said[-3000:]
        assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
        assert_trained_once(study)
    finally:
        study.cleanup()
