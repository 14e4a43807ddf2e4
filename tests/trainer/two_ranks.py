"""A script under two real training ranks, as the tests of what a launch says once
(tests/trainer/test_bad_flag_said_once.py, test_refused_start.py) start it:
``accelerate launch --multi_gpu --num_processes 2``, gloo on CPU on any machine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from helpers import run_group
from test_distributed import free_port

ROOT = Path(__file__).resolve().parents[2]


def launch_two_ranks(
    script: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """`script` with `args` on two ranks (``--multi_gpu --num_processes 2 --num_machines 1``,
    no mixed precision, no dynamo, a free main-process port), `env` added to this
    process's environment; its whole process group is killed after `timeout` seconds
    (`helpers.run_group`). The ranks import this checkout's package (PYTHONPATH), one
    BLAS thread each, see no GPU (gloo on CPU), and run with faulthandler on (a rank's
    fatal signal shows every thread's stack).

    The launcher is this interpreter's ``python -m accelerate.commands.launch``, not the
    ``accelerate`` found on PATH: that one may be another environment's, whose
    interpreter (and its packages) would run the ranks."""
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(free_port()), str(script), *args,
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    environment.update({"CUDA_VISIBLE_DEVICES": "", "PYTHONFAULTHANDLER": "1", **(env or {})})
    return run_group(cmd, timeout=timeout, env=environment)
