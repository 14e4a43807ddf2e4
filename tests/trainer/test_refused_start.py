"""A refused start under two real ranks (`accelerate launch --multi_gpu
--num_processes 2`, gloo on CPU) is said once: rank 0 prints the error, rank 1 exits
non-zero without printing it again (`melissa_trainer.common.refusal`). The oracle: the
error's text counted in the launch's whole output (two before the fix, one per rank),
and each rank's own record that it caught the refusal as a `ConfigError`."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import run_group
from test_distributed import free_port
from test_fresh_start import make

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).parents[1] / "scripts" / "refused_start.py"


def test_a_start_refused_on_two_ranks_is_said_once_and_fails_both(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make(out, max_steps=4).train()  # an earlier run's checkpoint-4: a fresh start is refused
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [
        accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()),
        str(SCRIPT), "--output_dir", str(out), "--batch_size", "4", "--buffer", "fifo",
        "--buffer_size", "64", "--report_to", "none", "--disable_progress_bar",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=240, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    # every rank refused (and could catch it as the ConfigError it is) ...
    caught = [json.loads((out / f"caught_{r}.json").read_text()) for r in range(2)]
    assert [c["class"] for c in caught] == ["ConfigError", "ConfigError"], caught
    # ... and the error is printed once, by rank 0 (rank 1's copy exits quietly)
    assert output.count("holds checkpoints of an earlier run") == 1, output[-6000:]
    assert [c["system_exit"] for c in caught] == [False, True]
