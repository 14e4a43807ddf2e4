"""What a stopped run of the Navier–Stokes example exits with under ``accelerate launch``,
as ``--json``'s help and docs/how-to/neural-operator.md say it: a user trial
(2026-12-04) SIGTERMed ``accelerate launch`` (as ``kill``, a batch system or a
container's stop does) and it exited 143, Ctrl-C to the group 130, where both said
"accelerate launch reports 1" (that is a signal to a rank alone: torchrun's
ChildFailedError)."""

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
from navier_stokes import train

ROOT = Path(__file__).resolve().parents[2]
HOW_TO = ROOT / "docs" / "how-to" / "neural-operator.md"


def test_the_help_and_the_how_to_say_what_accelerate_launch_exits_with() -> None:
    help_words = " ".join(train.parser([]).format_help().split())
    page = " ".join(HOW_TO.read_text().split())
    for words in (help_words, page):
        assert "accelerate launch reports 1" not in words
        assert "1 under `accelerate launch`" not in words
    assert "the same under accelerate launch, unless the signal reached a rank alone" in (
        help_words
    ), help_words
    assert "the same under `accelerate launch`, 1 when the signal reached a rank alone" in page


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_sigterm_to_accelerate_launch_exits_143(tmp_path: Path) -> None:
    """Two ranks (gloo on CPU), a tiny study; once a step is logged, SIGTERM to the
    launcher: its ranks stop, checkpoint, and the launcher exits 143 (128 + SIGTERM)."""
    out = tmp_path / "launch.log"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(held_port()),
           str(ROOT / "examples" / "navier_stokes" / "train.py"),
           "--grid_size", "16", "--modes", "4", "--width", "4", "--layers", "1",
           "--time_steps", "4", "--dt", "0.1", "--num_validation", "1", "--no_plot",
           "--num_simulations", "64", "--batch_size", "2", "--watermark", "4",
           "--buffer_size", "32", "--logging_steps", "1", "--json",
           "--output_dir", str(tmp_path / "out")]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",
    }
    with out.open("w") as sink:
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 240
        while "step 2 | loss" not in out.read_text():  # training under way on both ranks
            assert proc.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)  # (polling a file: what is waited on is its content)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=200) == 143, out.read_text()[-3000:]
        said = out.read_text()
        assert "preempted by SIGTERM" in said and '{"val_mse"' not in said, said[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_blown_up_held_out_simulation_is_said_once_under_two_ranks(tmp_path: Path) -> None:
    """``--dt 0.25`` (its third held-out simulation blows up) on two ranks: every rank
    computes the held-out set and refuses alike; the line is said once, by rank 0 (a
    `ConfigError` through `refusals_end_the_program`), not once per rank."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(held_port()),
           str(ROOT / "examples" / "navier_stokes" / "train.py"), "--dt", "0.25",
           "--time_steps", "4", "--num_validation", "3", "--no_plot",
           "--output_dir", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "CUDA_VISIBLE_DEVICES": ""}, timeout=240
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said[-3000:]
    assert said.count("error: a held-out simulation: unstable at t=1.75") == 1, said[-3000:]
    assert "lower --dt" in said, said[-3000:]  # (torchrun adds its ChildFailedError's own)
