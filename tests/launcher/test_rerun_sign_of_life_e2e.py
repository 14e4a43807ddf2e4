"""A resumed study whose reruns recompute the steps the checkpoint holds more slowly than
the launcher's silence bound ends, each (simulation, step) trained exactly once: the
hsolver user trial (exp8b.sh), with a Python solver.

The study (tests/launcher/rerun_silence_driver.py): 2 simulations of `STEPS` steps,
`STEP_S` s each, ``simulation_timeout=TIMEOUT`` (which bounds the start-up too). It is
SIGTERMed once simulation 0 has sent `HELD` steps (the trainer saves a checkpoint and
exits), and resumed from it: both simulations run again (``MELISSA_TRAINER_ATTEMPT=1``)
and skip the steps their receivers hold (docs/protocol.md section 17), their solvers
recomputing them: about `HELD` x `STEP_S` s, nearly twice `TIMEOUT`. Before, nothing was
sent meanwhile and the launcher killed each rerun as hung, three times, and the resumed
study failed (exit 1). Now the rerun sends a held step every quarter of the bound
(``MELISSA_TRAINER_SILENCE_S``) it goes without a send: a silence of two
steps, under a third of `TIMEOUT`. The oracle: the resumed study's exit status and
``python -m melissa_trainer.lineage check`` (every step of every simulation trained
exactly once across both runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rerun_silence_runs import Pace, stopped_then_resumed

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(420)]

SIMULATIONS, STEPS = 2, 16
#: a solver's step (s), and the launcher's bound: a sign of life is due TIMEOUT / 4 =
#: 1 s after the last send, so every second step is one (1.2 s apart, the first 1.2 s
#: after the HELLO: a third of TIMEOUT, as a first attempt's start-up takes)
STEP_S, TIMEOUT = 0.6, 4.0
#: simulation 0's steps sent when the trainer is stopped: the rerun's held part lasts
#: about HELD x STEP_S = 7.2 s, nearly twice TIMEOUT
HELD = 12


def test_a_resumed_study_whose_reruns_recompute_held_steps_slowly_ends(tmp_path: Path) -> None:
    pace = Pace(SIMULATIONS, STEPS, STEP_S, TIMEOUT)
    code, said = stopped_then_resumed(tmp_path, pace, HELD, range(1))  # (simulation 0's)
    assert code == 0, said[-4000:]
    assert f"{SIMULATIONS} run again" in said, said[-4000:]  # (both rerun)
    assert " silent for " not in said, said[-4000:]  # (no rerun killed as hung)
    cli = [sys.executable, "-m", "melissa_trainer.lineage", "check", str(tmp_path / "out"),
           "--simulations", str(SIMULATIONS), "--steps", str(STEPS)]  # fmt: skip
    checked = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "EXACTLY ONCE: OK" in checked.stdout, checked.stdout
