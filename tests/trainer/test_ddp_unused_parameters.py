"""`--ddp_find_unused_parameters` (Hugging Face's name) under two real gloo ranks
(`accelerate launch --multi_gpu --num_processes 2`): a model with a parameter its forward
never uses trains with it; without it, DDP's error ("Expected to have finished reduction
in the prior iteration") names the option. Before, the flag was unrecognized and the
error DDP's alone."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import run_group

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.e2e]

SCRIPT = Path(__file__).parent / "ddp_unused_script.py"


def _launch(tmp_path: Path, *flags: str) -> tuple[int, str]:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [
        accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(held_port()), str(SCRIPT),
        "--output_dir", str(tmp_path / "out"), "--batch_size", "4", "--buffer", "fifo",
        "--buffer_size", "64", "--report_to", "none", "--disable_progress_bar",
        "--save_at_end", "false", *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=240, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def test_find_unused_parameters_lets_it_train(tmp_path: Path) -> None:
    code, out = _launch(tmp_path, "--ddp_find_unused_parameters")
    assert code == 0, out[-4000:]
    assert "RAN 10 rank 0" in out and "RAN 10 rank 1" in out


def test_without_it_the_error_names_the_option(tmp_path: Path) -> None:
    code, out = _launch(tmp_path)
    assert code != 0
    assert "Expected to have finished reduction" in out, out[-4000:]
    assert "--ddp_find_unused_parameters true" in out, out[-4000:]
