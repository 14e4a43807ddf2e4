"""With two training ranks, a resumed study whose rerun sends every step to receiver 1,
and recomputes its held steps more slowly than the launcher's silence bound, ends: its
signs of life go to the receiver its steps are routed to, which the launcher hears since
`stream.rank_activity` (`client.rerun`).

The study: tests/launcher/rerun_silence_driver.py on two ranks (``accelerate launch``,
gloo on CPU), 2 simulations of tests/launcher/rank_one_solver.py, `STEPS` steps numbered
0, 2, 4, ..., `STEP_S` s each: under the routing ``(s + t) % 2`` every step of
simulation 1 goes to receiver 1, of simulation 0 to receiver 0. ``simulation_timeout=
TIMEOUT`` (the start-up's bound too). SIGTERMed once both have sent `HELD` steps, and
resumed: both run again and skip the steps their receivers hold, their solvers
recomputing them for about `HELD` x `STEP_S` s, past `TIMEOUT`. Before, the signs of life
went to receiver 0 only: simulation 1's rerun, whose steps never route there, sent
nothing until its first step the checkpoint lacked, and was killed as hung ("no message
yet") on every attempt, then redrawn. The oracle: the resumed study's exit status, no
kill for silence, both simulations run again, and each solver's own log (its rerun
printed every step)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rerun_silence_runs import Pace, stopped_then_resumed

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

SOLVER = Path(__file__).with_name("rank_one_solver.py")
SIMULATIONS, STEPS = 2, 28
#: a solver's step (s), and the launcher's bound (the start-up's too): a sign of life is
#: due TIMEOUT / 4 = 2 s after the last send, every fourth step
STEP_S, TIMEOUT = 0.6, 8.0
#: each simulation's steps sent when the trainer is stopped: the rerun's held part lasts
#: about HELD x STEP_S = 12 s, past TIMEOUT
HELD = 20


def test_a_rerun_streaming_to_receiver_1_only_is_heard_while_it_skips(tmp_path: Path) -> None:
    pace = Pace(SIMULATIONS, STEPS, STEP_S, TIMEOUT, ranks=2, solver=(sys.executable, str(SOLVER)))
    code, said = stopped_then_resumed(tmp_path, pace, HELD, range(SIMULATIONS))
    assert " silent for " not in said, said[-4000:]  # (no rerun killed as hung)
    assert code == 0, said[-4000:]
    assert f"{SIMULATIONS} run again" in said, said[-4000:]  # (both rerun)
    solver = (tmp_path / "out" / "study" / "logs" / "sim-1.log").read_text().splitlines()
    every = [f"step {2 * i} sent" for i in range(STEPS)]
    assert solver[-STEPS:] == every, solver  # (its rerun, to the end)
