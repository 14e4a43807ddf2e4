"""With two training ranks, a resumed study whose reruns recompute held steps more slowly
than the launcher's silence bound ends: each rerun's signs of life are heard, wherever
they are routed (the launcher hears every rank's receiver: `stream.rank_activity`; when
this was written it heard rank 0's alone, and the signs went to receiver 0 only).

The study of test_rerun_sign_of_life_e2e.py (tests/launcher/rerun_silence_driver.py) on
two ranks (``accelerate launch``, gloo on CPU): 2 simulations of `STEPS` steps, `STEP_S`
s each, ``simulation_timeout=TIMEOUT`` (which bounds the start-up too), SIGTERMed once
both simulations have sent `HELD` steps, and resumed from the checkpoint: both run again
and skip the steps their receivers hold, their solvers recomputing them for about `HELD`
x `STEP_S` s, longer than `TIMEOUT`. The receivers advertise the routing ``(s + t) %
2``: simulation 1's even steps go to receiver 1. A sign of life is the held step at
hand once a quarter of the bound has passed since the client's last send: with a
constant step time, steps 0, 4, 8 ..., all of them simulation 1's receiver 1's. Before
the hand-off, rank 0 heard nothing of simulation 1's rerun until its first unheld step:
killed as hung on every attempt, the resumed study failed. The oracle: the resumed
study's exit status, no kill for silence, and ``python -m melissa_trainer.lineage check``
(every step of every simulation trained exactly once across both runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rerun_silence_runs import Pace, stopped_then_resumed

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

SIMULATIONS, STEPS = 2, 28
#: a solver's step (s), and the launcher's bound (the start-up's too): a sign of life is
#: due TIMEOUT / 4 = 2 s after the last send, so every fourth step is one (2.4 s apart);
#: the first send is step 0, 0.6 s after the HELLO, as its first attempt's was (a bound
#: of 4 s, that of test_rerun_sign_of_life_e2e.py, killed a start-up of 1.2 s on a
#: loaded machine)
STEP_S, TIMEOUT = 0.6, 8.0
#: each simulation's steps sent when the trainer is stopped: the rerun's held part lasts
#: about HELD x STEP_S = 12 s, past TIMEOUT
HELD = 20


def test_two_ranks_hear_the_signs_of_life_of_slow_reruns(tmp_path: Path) -> None:
    pace = Pace(SIMULATIONS, STEPS, STEP_S, TIMEOUT, ranks=2)
    code, said = stopped_then_resumed(tmp_path, pace, HELD, range(SIMULATIONS))
    assert " silent for " not in said, said[-4000:]  # (no rerun killed as hung)
    assert code == 0, said[-4000:]
    assert f"{SIMULATIONS} run again" in said, said[-4000:]  # (both rerun)
    cli = [sys.executable, "-m", "melissa_trainer.lineage", "check", str(tmp_path / "out"),
           "--simulations", str(SIMULATIONS), "--steps", str(STEPS)]  # fmt: skip
    checked = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "EXACTLY ONCE: OK" in checked.stdout, checked.stdout
