"""The study of tests/launcher/rerun_silence_driver.py stopped mid-run then resumed, for
the tests of a rerun's signs of life (test_rerun_sign_*_e2e.py): `stopped_then_resumed`
runs it on one rank (the driver itself) or two (``accelerate launch``, gloo on CPU),
SIGTERMs it once its simulations have sent `held` steps (the trainer saves a checkpoint
and exits non-zero), waits for its solvers to be gone, resumes it from the checkpoint
and returns the resumed run's exit status and output. Every process is SIGKILLed at the
end if still running (its process group: the ranks and solvers too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from held_ports import held_port
from process_tree import processes_with
from waiting import wait_until

__all__ = ["Pace", "sent", "stopped_then_resumed"]

DRIVER = Path(__file__).with_name("rerun_silence_driver.py")
FLAGS = ["--batch_size", "4", "--buffer", "fifo", "--save_steps", "2", "--report_to", "none",
         "--disable_progress_bar", "--save_at_end", "false"]  # fmt: skip


@dataclass(frozen=True)
class Pace:
    """The study's shape: `simulations` of `steps` steps, `step_s` s each, under
    ``simulation_timeout=timeout`` (the start-up's bound too); `ranks` training ranks;
    `solver` the solver's command (None: tests/launcher/rerun_silence_solver.py)."""

    simulations: int
    steps: int
    step_s: float
    timeout: float
    ranks: int = 1
    solver: tuple[str, ...] | None = None


def start(tmp: Path, name: str, pace: Pace, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {
        **os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(Path(__file__).parents[2]), "RS_STEPS": str(pace.steps),
        "RS_STEP_S": str(pace.step_s), "RS_TIMEOUT": str(pace.timeout),
        "RS_SIMULATIONS": str(pace.simulations),
    }  # fmt: skip
    if pace.solver is not None:
        env["RS_COMMAND"] = json.dumps(list(pace.solver))
    study = [str(DRIVER), *FLAGS, "--output_dir", str(tmp / "out"), *extra]
    cmd = [sys.executable, *study]
    if pace.ranks > 1:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(pace.ranks), "--num_machines", "1", "--mixed_precision",
               "no", "--dynamo_backend", "no", "--main_process_port", str(held_port()),
               *study]  # fmt: skip
    log = tmp / f"{name}.out"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


def sent(out: Path, simulation: int) -> int:
    """The steps simulation `simulation`'s solver said it sent (its log, both runs)."""
    log = out / "study" / "logs" / f"sim-{simulation}.log"
    return log.read_text().count(" sent\n") if log.exists() else 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def stopped_then_resumed(tmp: Path, pace: Pace, held: int, watched: range) -> tuple[int, str]:
    """Run the study in `tmp` until each simulation of `watched` has sent `held` steps,
    SIGTERM it (the trainer on one rank; the launch's process group, its ranks, on two),
    check it exited non-zero and each of `watched` holds a part only, then resume it;
    the resumed run's exit status and output (module docstring)."""
    out = tmp / "out"
    first, log = start(tmp, "first", pace)
    try:
        wait_until(lambda: min(sent(out, s) for s in watched) >= held,
                   lambda: log.read_text()[-3000:], 300, procs=[first], interval=0.02)  # fmt: skip
        if pace.ranks > 1:
            os.killpg(first.pid, signal.SIGTERM)  # (the ranks: they save, then exit)
        else:
            os.kill(first.pid, signal.SIGTERM)  # (the trainer: it saves, then exits)
        assert first.wait(120) != 0, log.read_text()[-3000:]
    finally:
        _stop(first)
    wait_until(lambda: not processes_with(str(out / "rendezvous")), "solvers gone", 30)
    assert all(sent(out, s) < pace.steps for s in watched)  # (stopped mid-run: a part held)
    second, log = start(tmp, "second", pace, "--resume_from_checkpoint", "latest")
    try:
        code = second.wait(360)
    finally:
        _stop(second)
    return code, log.read_text()
