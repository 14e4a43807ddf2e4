"""With two training ranks, a simulation whose steps all go to receiver 1 and that hangs
mid-run is killed as silent *since its last message*, by the bound between two messages,
not taken for one that never sent (`stream.rank_activity`: every rank's receiver heard by
the launcher on rank 0).

The study: tests/launcher/rerun_silence_driver.py on two ranks (``accelerate launch``,
gloo on CPU), 2 simulations of tests/launcher/rank_one_solver.py, whose time steps are
numbered 0, 2, 4, ...: under the routing ``(s + t) % 2`` every step of simulation 1 goes
to receiver 1, of simulation 0 to receiver 0. ``simulation_timeout=TIMEOUT`` between two
messages, ``startup_timeout=STARTUP`` before the first. Simulation 1's first attempt hangs
after `HANG_AFTER` steps; its restart runs to the end. Before, the launcher heard rank 0's
receiver only: simulation 1 had sent nothing there, so its hang was judged a start-up,
killed after STARTUP s (60 s, not TIMEOUT), the warning saying "no message yet" and
advising a larger startup_timeout. The oracle: the solver's own log (it printed "step t
sent" before "hanging"), and the kill's words: silent since its last message, by
``simulation_timeout=TIMEOUT``; the study then ends (exit 0), nothing else killed. And
a healthy simulation streaming to receiver 1 only, for longer than the start-up bound,
is not killed (it was, as hung before its first message)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from held_ports import held_port

from melissa_trainer.launcher.log_lines import LAUNCHER

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(480)]

HERE = Path(__file__).parent
DRIVER, SOLVER = HERE / "rerun_silence_driver.py", HERE / "rank_one_solver.py"
#: steps per simulation, a step's seconds; the bound between two messages, the start-up's
STEPS, STEP_S, TIMEOUT, STARTUP = 10, 0.3, 4.0, 60.0
#: simulation 1's first attempt hangs after this many steps, all sent to receiver 1
HANG_AFTER = 3
#: the second test's bound (its start-up's too: a loaded machine's start-up of 4 s and
#: more is no hang), and its simulations' steps: they stream for LONG_STEPS x STEP_S s,
#: longer than that bound
LONG_TIMEOUT, LONG_STEPS = 15.0, 70
FLAGS = ["--batch_size", "4", "--buffer", "fifo", "--report_to", "none",
         "--disable_progress_bar", "--save_at_end", "false"]  # fmt: skip


def run_study(tmp: Path, **settings: str) -> tuple[int, str]:
    """The study (module docstring) under `settings` (its RS_* variables): its exit status
    and what it said."""
    env = {
        **os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(Path(__file__).parents[2]), "RS_SIMULATIONS": "2",
        "RS_COMMAND": json.dumps([sys.executable, str(SOLVER)]), **settings,
    }  # fmt: skip
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(held_port()), str(DRIVER),
           *FLAGS, "--output_dir", str(tmp / "out")]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        said, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode, said.decode(errors="replace")


def test_a_hang_on_receiver_1_is_killed_as_silent_since_its_last_message(tmp_path: Path) -> None:
    code, text = run_study(
        tmp_path, RS_STEPS=str(STEPS), RS_STEP_S=str(STEP_S), RS_TIMEOUT=str(TIMEOUT),
        RS_STARTUP=str(STARTUP), RS_HANG_SIM="1", RS_HANG_AFTER=str(HANG_AFTER),
    )  # fmt: skip
    solver = (tmp_path / "out" / "study" / "logs" / "sim-1.log").read_text()
    sent = [f"step {2 * i} sent" for i in range(HANG_AFTER)]
    own = [line for line in solver.splitlines() if not line.startswith(LAUNCHER)]
    assert own[: HANG_AFTER + 1] == [*sent, "hanging"], solver  # (then its restart's)
    kills = [line for line in text.splitlines() if " silent for " in line]
    assert len(kills) == 1, text[-4000:]  # (simulation 0 streams to rank 0: never silent)
    assert kills[0].startswith("simulation 1 (attempt 0,"), kills[0]
    assert f"(since its last message; simulation_timeout={TIMEOUT}" in kills[0], kills[0]
    assert code == 0, text[-4000:]


def test_a_healthy_simulation_streaming_to_receiver_1_only_is_not_killed(tmp_path: Path) -> None:
    """No `startup_timeout`: the numeric bound (`LONG_TIMEOUT`) is the start-up's too, and
    simulation 1 streams for longer than it (`LONG_STEPS` x `STEP_S`), its steps never
    more than `STEP_S` apart. Before, the launcher had heard nothing of it after that
    bound and killed it as hung before its first message ("no message yet"), on every
    attempt: given up after its restarts, the study redrew it (the same again)."""
    code, text = run_study(
        tmp_path, RS_STEPS=str(LONG_STEPS), RS_STEP_S=str(STEP_S), RS_TIMEOUT=str(LONG_TIMEOUT)
    )
    solver = (tmp_path / "out" / "study" / "logs" / "sim-1.log").read_text()
    own = [line for line in solver.splitlines() if not line.startswith(LAUNCHER)]
    assert own == [f"step {2 * i} sent" for i in range(LONG_STEPS)], solver
    assert " silent for " not in text, text[-4000:]
    assert code == 0, text[-4000:]
