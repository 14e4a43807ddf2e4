"""A script under two real training ranks, as the tests of what a launch says once
(tests/trainer/test_bad_flag_said_once.py, test_refused_start.py) start it:
``accelerate launch --multi_gpu --num_processes 2``, gloo on CPU on any machine; and
the study scripts of tests/scripts so (`run_study_script`)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from held_ports import held_port
from process_tree import run_group

ROOT = Path(__file__).resolve().parents[2]


def launch_two_ranks(
    script: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
    launch: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """`script` with `args` on two ranks (``--multi_gpu --num_processes 2 --num_machines 1``,
    no mixed precision, no dynamo, a free main-process port, then `launch`: more of the
    launcher's options, ``--max_restarts 1``), `env` added to this
    process's environment; its whole process group is killed after `timeout` seconds
    (`process_tree.run_group`). The ranks import this checkout's package (PYTHONPATH), one
    BLAS thread each, see no GPU (gloo on CPU), and run with faulthandler on (a rank's
    fatal signal shows every thread's stack).

    The launcher is this interpreter's ``python -m accelerate.commands.launch``, not the
    ``accelerate`` found on PATH: that one may be another environment's, whose
    interpreter (and its packages) would run the ranks."""
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(held_port()), *launch, str(script),
        *args,
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    environment.update({"CUDA_VISIBLE_DEVICES": "", "PYTHONFAULTHANDLER": "1", **(env or {})})
    return run_group(cmd, timeout=timeout, env=environment)


def run_study_script(
    script: Path, tmp_path: Path, *args: str, timeout: float
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], str]:
    """A study script of tests/scripts (``script OUT SOLVER ARGS...``, whose ``SOLVER``
    is its solver's source) on two ranks (`launch_two_ranks`): OUT is ``tmp_path/out``,
    the solver is written to ``tmp_path/solver.py``. Returns the process, each rank's
    ``tmp_path/exit-<rank>.json`` (how its `train()` ended) and the tail of what the
    launch said (for the tests' messages)."""
    sys.path.insert(0, str(script.parent))
    try:
        solver_source = importlib.import_module(script.stem).SOLVER
    finally:
        sys.path.remove(str(script.parent))
    solver = tmp_path / "solver.py"
    solver.write_text(solver_source)
    proc = launch_two_ranks(script, str(tmp_path / "out"), str(solver), *args, timeout=timeout)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    # (a launch killed at `timeout` writes none: say so, not a bare FileNotFoundError)
    missing = [r for r in range(2) if not (tmp_path / f"exit-{r}.json").exists()]
    assert not missing, f"no exit record of rank(s) {missing}, code {proc.returncode}: {said}"
    ends = [json.loads((tmp_path / f"exit-{r}.json").read_text()) for r in range(2)]
    return proc, ends, said
