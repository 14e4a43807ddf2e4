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

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import processes_with
from waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(420)]

DRIVER = Path(__file__).with_name("rerun_silence_driver.py")
SIMULATIONS, STEPS = 2, 16
#: a solver's step (s), and the launcher's bound: a sign of life is due TIMEOUT / 4 =
#: 1 s after the last send, so every second step is one (1.2 s apart, the first 1.2 s
#: after the HELLO: a third of TIMEOUT, as a first attempt's start-up takes)
STEP_S, TIMEOUT = 0.6, 4.0
#: simulation 0's steps sent when the trainer is stopped: the rerun's held part lasts
#: about HELD x STEP_S = 7.2 s, nearly twice TIMEOUT
HELD = 12
FLAGS = ["--batch_size", "4", "--buffer", "fifo", "--save_steps", "2", "--report_to", "none",
         "--disable_progress_bar", "--save_at_end", "false"]  # fmt: skip


def start(tmp: Path, name: str, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {
        **os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(Path(__file__).parents[2]), "RS_STEPS": str(STEPS),
        "RS_STEP_S": str(STEP_S), "RS_TIMEOUT": str(TIMEOUT),
        "RS_SIMULATIONS": str(SIMULATIONS),
    }  # fmt: skip
    log = tmp / f"{name}.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *FLAGS, "--output_dir", str(tmp / "out"), *extra],
            cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return proc, log


def sent(out: Path, simulation: int) -> int:
    log = out / "study" / "logs" / f"sim-{simulation}.log"
    return log.read_text().count(" sent\n") if log.exists() else 0


def test_a_resumed_study_whose_reruns_recompute_held_steps_slowly_ends(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first, log = start(tmp_path, "first")
    try:
        wait_until(lambda: sent(out, 0) >= HELD, lambda: log.read_text()[-3000:], 240,
                   procs=[first], interval=0.02)  # fmt: skip
        os.kill(first.pid, signal.SIGTERM)  # (the trainer: it saves, then exits)
        assert first.wait(120) != 0, log.read_text()[-3000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
    wait_until(lambda: not processes_with(str(out / "rendezvous")), "solvers gone", 30)
    assert sent(out, 0) < STEPS  # (stopped mid-run: its rerun holds a part)
    second, log = start(tmp_path, "second", "--resume_from_checkpoint", "latest")
    try:
        code = second.wait(300)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(30)
    said = log.read_text()
    assert code == 0, said[-4000:]
    assert f"{SIMULATIONS} run again" in said, said[-4000:]  # (both rerun)
    assert " silent for " not in said, said[-4000:]  # (no rerun killed as hung)
    cli = [sys.executable, "-m", "melissa_trainer.lineage", "check", str(out),
           "--simulations", str(SIMULATIONS), "--steps", str(STEPS)]  # fmt: skip
    checked = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "EXACTLY ONCE: OK" in checked.stdout, checked.stdout
