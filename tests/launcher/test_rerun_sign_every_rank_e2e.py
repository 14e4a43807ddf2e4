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

import json
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

HERE = Path(__file__).parent
DRIVER, SOLVER = HERE / "rerun_silence_driver.py", HERE / "rank_one_solver.py"
SIMULATIONS, STEPS = 2, 28
#: a solver's step (s), and the launcher's bound (the start-up's too): a sign of life is
#: due TIMEOUT / 4 = 2 s after the last send, every fourth step
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
        "RS_SIMULATIONS": str(SIMULATIONS), "RS_COMMAND": json.dumps([sys.executable, str(SOLVER)]),
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


def test_a_rerun_streaming_to_receiver_1_only_is_heard_while_it_skips(tmp_path: Path) -> None:
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
    solver = (out / "study" / "logs" / "sim-1.log").read_text().splitlines()
    every = [f"step {2 * i} sent" for i in range(STEPS)]
    assert solver[-STEPS:] == every, solver  # (its rerun, to the end)
