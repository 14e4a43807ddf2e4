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

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from helpers import processes_with
from waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

DRIVER = Path(__file__).with_name("rerun_silence_driver.py")
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
FLAGS = ["--batch_size", "4", "--buffer", "fifo", "--save_steps", "2", "--report_to", "none",
         "--disable_progress_bar", "--save_at_end", "false"]  # fmt: skip


def start(tmp: Path, name: str, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {
        **os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(Path(__file__).parents[2]), "RS_STEPS": str(STEPS),
        "RS_STEP_S": str(STEP_S), "RS_TIMEOUT": str(TIMEOUT),
        "RS_SIMULATIONS": str(SIMULATIONS),
    }  # fmt: skip
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(held_port()), str(DRIVER),
           *FLAGS, "--output_dir", str(tmp / "out"), *extra]  # fmt: skip
    log = tmp / f"{name}.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


def sent(out: Path, simulation: int) -> int:
    log = out / "study" / "logs" / f"sim-{simulation}.log"
    return log.read_text().count(" sent\n") if log.exists() else 0


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def test_two_ranks_hear_the_signs_of_life_of_slow_reruns(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first, log = start(tmp_path, "first")
    try:
        wait_until(lambda: min(sent(out, s) for s in range(SIMULATIONS)) >= HELD,
                   lambda: log.read_text()[-3000:], 300, procs=[first], interval=0.02)  # fmt: skip
        os.killpg(first.pid, signal.SIGTERM)  # (the ranks: they save, then exit)
        assert first.wait(120) != 0, log.read_text()[-3000:]
    finally:
        stop(first)
    wait_until(lambda: not processes_with(str(out / "rendezvous")), "solvers gone", 30)
    assert all(sent(out, s) < STEPS for s in range(SIMULATIONS))  # (each holds a part)
    second, log = start(tmp_path, "second", "--resume_from_checkpoint", "latest")
    try:
        code = second.wait(360)
    finally:
        stop(second)
    said = log.read_text()
    assert " silent for " not in said, said[-4000:]  # (no rerun killed as hung)
    assert code == 0, said[-4000:]
    assert f"{SIMULATIONS} run again" in said, said[-4000:]  # (both rerun)
    cli = [sys.executable, "-m", "melissa_trainer.lineage", "check", str(out),
           "--simulations", str(SIMULATIONS), "--steps", str(STEPS)]  # fmt: skip
    checked = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "EXACTLY ONCE: OK" in checked.stdout, checked.stdout
