"""The heat_guess example stopped by SIGTERM (a preemption, Ctrl-C) and continued, as
its last line says: "preempted by SIGTERM at step N; checkpoint ...; resume with
resume_from_checkpoint='latest' (--resume_from_checkpoint latest on the command line)".

A user's trial (2026-12-04): the example took no such flag (exit 2, "unrecognized
arguments"), and the same command again in that --output_dir was refused (exit 1: it
holds a checkpoint and resume_from_checkpoint is unset): a stopped run could be neither
continued nor run again there. Now the flag passes to its `TrainingArguments`, and a
resumed run keeps the records of the simulations finished before the stop (which do not
run again), so its report covers every simulation. Failed before: the resumed run
exited 2.

Real processes (the example, its launcher's solvers); the stop waits on an event (the
first simulation's record written), never on a sleep."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_group
from waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGTERM"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_guess" / "train.py"
SIMS = 4


@pytest.mark.timeout(600)
def test_a_stopped_run_is_continued_with_resume_from_checkpoint(tmp_path: Path) -> None:
    cmd = [sys.executable, str(EXAMPLE), "--num_simulations", str(SIMS), "--time_steps", "20",
           "--grid_size", "16", "--output_dir", str(tmp_path), "--json"]  # fmt: skip
    first = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        wait_until(
            lambda: any((tmp_path / "records").glob("sim*.json")),
            "the first simulation's record",
            300,
            procs=[first],
        )
        first.send_signal(signal.SIGTERM)
        said, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert first.returncode == 143, said[-3000:]
    assert "--resume_from_checkpoint latest" in said, said[-3000:]

    # the same command without the flag: refused there, a usage error (exit 2, one
    # line saying how to go on), not a fresh run over the checkpoint (the page said
    # exit 1: a user's trial, 2026-12-05, read 2)
    again = run_group(cmd, timeout=300)
    assert again.returncode == 2, (again.stdout + again.stderr)[-3000:]
    assert "holds checkpoints of an earlier run" in again.stderr, again.stderr[-3000:]
    assert "--resume_from_checkpoint latest" in again.stderr, again.stderr[-3000:]

    resumed = run_group([*cmd, "--resume_from_checkpoint", "latest"], timeout=300)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out[-3000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert [r["simulation"] for r in summary["simulations"]] == list(range(SIMS)), out[-3000:]

    # the refusal's third way on, taken: --overwrite_output_dir starts afresh there, the
    # checkpoints moved aside (before: "unrecognized arguments", exit 2, though the
    # refusal named it: a user's trial, 2026-12-05)
    named = re.findall(r"(--\w+)", again.stderr)  # (the example's words: its flags)
    assert "--overwrite_output_dir" in named, again.stderr[-3000:]
    fresh = run_group([*cmd, "--overwrite_output_dir"], timeout=300)
    out = fresh.stdout + fresh.stderr
    assert fresh.returncode == 0, out[-3000:]
    summary = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert [r["simulation"] for r in summary["simulations"]] == list(range(SIMS)), out[-3000:]
    assert list((tmp_path / "run").glob("checkpoints-previous-*")), out[-3000:]


def test_resuming_without_an_output_dir_is_refused_naming_it() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--resume_from_checkpoint", "latest"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "WORLD_SIZE": "1"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--resume_from_checkpoint needs the --output_dir" in proc.stderr, proc.stderr
