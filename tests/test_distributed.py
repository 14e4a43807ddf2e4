"""Two real processes under `accelerate launch --multi_gpu --num_processes 2` (gloo on CPU).

Ranks receive uneven streams; every rank must end at the same step, without a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_group

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCRIPT = Path(__file__).parent / "scripts" / "uneven_streams.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(tmp_path: Path, *flags: str) -> list[dict]:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        accelerate,
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(SCRIPT),
        "--output_dir",
        str(out),
        "--batch_size",
        "8",
        "--buffer",  # each sample once: the step counts rely on it
        "fifo",
        "--buffer_size",
        "64",
        "--report_to",
        "none",
        "--disable_progress_bar",
        "--logging_steps",
        "3",
        *flags,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine (1 GPU cannot hold 2 ranks)
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in results] == [2, 2], "expected two ranks in one process group"
    assert {r["backend"] for r in results} == {"gloo"}
    return results


def test_uneven_streams_end_every_rank_at_the_same_step(tmp_path: Path) -> None:
    results = launch(
        tmp_path, "--short", "10", "--long", "60", "--stop_sync_steps", "4", "--save_steps", "4"
    )
    steps = {r["global_step"] for r in results}
    assert steps == {10}  # rank 0's 10 batches bound both ranks
    assert all(r["stream_ended"] for r in results)
    assert results[0]["samples_seen"] == results[1]["samples_seen"] == 80
    # one stop all-reduce per window of 4 steps: 3 windows, never one per step
    assert results[0]["collectives"] == results[1]["collectives"] == 3
    # DDP kept the replicas identical; reduced figures are identical on both ranks
    assert results[0]["param_sum"] == results[1]["param_sum"]
    assert results[0]["eval_loss"] == results[1]["eval_loss"] and results[0]["eval_loss"]
    assert results[0]["losses"] == results[1]["losses"]
    ckpt = tmp_path / "out" / "checkpoints" / "checkpoint-10"
    assert (ckpt / "rank_0" / "buffer.json").is_file() and (
        ckpt / "rank_1" / "buffer.json"
    ).is_file()


def test_a_stop_requested_on_one_rank_stops_both(tmp_path: Path) -> None:
    results = launch(
        tmp_path, "--short", "100", "--long", "100", "--stop_sync_steps", "4", "--stop_at", "5"
    )
    assert {r["global_step"] for r in results} == {8}
    assert not any(r["stream_ended"] for r in results)


@pytest.mark.timeout(30)
def test_a_launch_that_times_out_is_killed_with_its_children(tmp_path: Path) -> None:
    """`run_group` (the 2-rank launches above): on timeout the launcher's children die
    too, as `accelerate launch`'s ranks must (killing the launcher alone left them)."""
    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(["sh", "-c", script], timeout=2)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and b"Z" not in _state(child):
        assert time.monotonic() < deadline, f"the launcher's child {child} survived"
        time.sleep(0.05)


def _state(pid: int) -> bytes:
    """The process's state letter from /proc (Z: a zombie, dead but not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"Z"
