"""A rank holding the quiet copy of rank 0's refusal ends as soon as rank 0 has said it,
with status 2 and no traceback, also where no launcher ends it.

It waited blind (`QUIET_RANK_GRACE`, 15 s) for its launcher to end it once rank 0 had
ended. A single ``accelerate launch`` does (torchrun's agent SIGTERMs its other workers
when one fails), but a launcher whose workers did not fail does not: under
``--num_machines 2`` the rank on the second machine lingered the whole grace after rank
0's line, its launcher with it. Now rank 0 leaves its line in the launcher's store
(`refusal_mark`) and the quiet rank ends at it.

The grace is made huge here (the script sets `refusals.QUIET_RANK_GRACE`), so a rank that
waited it out would never end: each launch must end on its own, well before the test's
bound. The refusal: a user-like script's trainer (tests/scripts/user_train_refusals.py)
on an output_dir whose lock another process holds (`OutputDirLocked`, decided by rank 0,
a quiet copy on rank 1). Two machines are two launchers on this host (127.0.0.1)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from held_ports import held_port
from test_refusals_end_the_program import FLAGS, SCRIPT, held  # noqa: F401 (a fixture)
from two_ranks import launch_two_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
#: the quiet rank's grace in these launches: never waited out within the test
HUGE_GRACE = 1e6
#: seconds each launch has to end (a launch: ~10-25 s here; the grace, never)
LAUNCH_BOUND = 200.0
#: the user's script with its grace set first (its knob: a module constant)
GRACE_SCRIPT = f"""\
import os, runpy
from melissa_trainer.trainer import refusals

refusals.QUIET_RANK_GRACE = float(os.environ["TEST_QUIET_RANK_GRACE"])
runpy.run_path({str(SCRIPT)!r}, run_name="__main__")
"""


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "error:" in line]


def test_one_launcher_ends_both_ranks_rank_0_says_it_once(
    held: tuple[Path, int],  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    out, pid = held
    script = tmp_path / "train.py"
    script.write_text(GRACE_SCRIPT)
    env = {"TEST_QUIET_RANK_GRACE": str(HUGE_GRACE)}
    proc = launch_two_ranks(script, "--output_dir", str(out), *FLAGS, env=env, timeout=LAUNCH_BOUND)
    output = proc.stdout + proc.stderr
    said = error_lines(output)
    assert len(said) == 1 and f"pid {pid}" in said[0], output[-3000:]
    assert proc.returncode != 0 and "exitcode  : 2" in output, output[-3000:]
    assert "[rank0]: Traceback" not in output and "[rank1]: Traceback" not in output


def test_the_rank_of_another_launcher_ends_at_rank_0s_line(
    held: tuple[Path, int],  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Two launchers (machines 0 and 1, one rank each). Before: machine 1's rank, its
    launcher with it, waited out the grace (here: until the bound's kill)."""
    out, pid = held
    script = tmp_path / "train.py"
    script.write_text(GRACE_SCRIPT)
    port = held_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    env.update({"PYTHONFAULTHANDLER": "1", "TEST_QUIET_RANK_GRACE": str(HUGE_GRACE)})
    launchers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "accelerate.commands.launch",
                "--multi_gpu",
                "--num_processes",
                "2",
                "--num_machines",
                "2",
                "--machine_rank",
                str(machine),
                "--main_process_ip",
                "127.0.0.1",
                "--main_process_port",
                str(port),
                "--mixed_precision",
                "no",
                "--dynamo_backend",
                "no",
                str(script),
                "--output_dir",
                str(out),
                *FLAGS,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )  # fmt: skip
        for machine in (0, 1)
    ]
    outputs: list[str] = []
    deadline = time.monotonic() + LAUNCH_BOUND
    try:
        for launcher in launchers:
            try:
                left = max(1.0, deadline - time.monotonic())
                outputs.append(launcher.communicate(timeout=left)[0])
            except subprocess.TimeoutExpired:  # (what it said, then killed below)
                os.killpg(launcher.pid, signal.SIGKILL)
                outputs.append(launcher.communicate()[0] + f"\n(killed at {LAUNCH_BOUND} s)")
    finally:
        for launcher in launchers:  # (a launch that did not end: its group, and its ranks)
            if launcher.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(launcher.pid, signal.SIGKILL)
                launcher.communicate()
    codes = [launcher.returncode for launcher in launchers]
    said = "\n---- machine 1 ----\n".join(o[-3000:] for o in outputs)
    assert all(code not in (0, -signal.SIGKILL) for code in codes), (codes, said)
    assert len(error_lines(outputs[0])) == 1 and f"pid {pid}" in outputs[0], said
    assert error_lines(outputs[1]) == [], said  # (rank 1 says nothing ...)
    assert "exitcode  : 2" in outputs[1], said  # (... and ends with status 2)
    assert "[rank1]: Traceback" not in outputs[1], said
    assert "melissa_trainer/trainer/" not in outputs[1], said  # (no rank's traceback)
