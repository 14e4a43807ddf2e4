"""Training starts after one stop-sync window of batches per rank, on one rank and on
several: under several ranks the agreement on the next window is started a window
ahead (`OnlineTrainer.train`), but not before the first window's steps, which would
wait for two windows of data first (with a FIFO/FIRO buffer, where each batch is new
data, a study's first step came at 30 s instead of 7 s on two ranks).

Deterministic: the source fills the buffer only when the trainer reads it
(`IterableSource`), so the samples put when step 1 ends are what training waited for."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest
from helpers import run_group

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.core.data_wait import WINDOW_NOTICE, DataWait

SCRIPT = Path(__file__).parents[1] / "scripts" / "first_window.py"
BATCH, WINDOW = 2, 4


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _run(tmp_path: Path, ranks: int, buffer: str) -> list[int]:
    """The samples put into each rank's buffer when step 1 ended."""
    out = tmp_path / f"out_{ranks}_{buffer}"
    out.mkdir()
    cmd = [sys.executable, str(SCRIPT)]
    if ranks > 1:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate or "accelerate", "launch", "--multi_gpu", "--num_processes", str(ranks)]
        cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
        cmd += ["--main_process_port", _port(), str(SCRIPT)]
    cmd += ["--output_dir", str(out), "--batch_size", str(BATCH), "--buffer", buffer]
    cmd += ["--buffer_size", str(BATCH), "--stop_sync_steps", str(WINDOW), "--max_steps", "12"]
    cmd += ["--report_to", "none", "--disable_progress_bar", "--save_at_end", "false"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(ranks)]
    assert [r["world_size"] for r in results] == [ranks] * ranks
    return [r["put_at_step_1"] for r in results]


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize("buffer", ["fifo", "firo"])
def test_two_ranks_start_after_one_window_of_batches_as_one_rank_does(
    tmp_path: Path, buffer: str
) -> None:
    """Each rank's first step comes once it holds one window (WINDOW batches), not two:
    before the fix, two ranks had each put 2 * WINDOW * BATCH samples at step 1."""
    assert _run(tmp_path, 1, buffer) == [WINDOW * BATCH]
    assert _run(tmp_path, 2, buffer) == [WINDOW * BATCH] * 2


def test_a_wait_for_the_rest_of_a_window_is_said_once_with_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reader holding part of its window says, once, after WINDOW_NOTICE s, why it
    waits and which setting shortens it (the test's clock: no sleep); not while it
    holds nothing (the first data's wait: the source's notices)."""
    now = [0.0]
    wait = DataWait(clock=lambda: now[0])
    buffer = FIFOBuffer(16)
    caplog.set_level(logging.WARNING, "melissa_trainer.core.dataset")
    wait.window(0, 8)  # nothing held yet
    for now[0] in (1.0, 10.0):
        wait.empty(buffer, BATCH)
    wait.window(1, 8)  # the clock starts at the first batch held (10 s)
    wait.window(3, 8)
    now[0] = 10.0 + WINDOW_NOTICE - 0.5
    wait.empty(buffer, BATCH)
    assert not [r for r in caplog.records if "batches it takes" in r.getMessage()]
    for now[0] in (10.0 + WINDOW_NOTICE, 100.0):
        wait.empty(buffer, BATCH)
    said = [r.getMessage() for r in caplog.records if "batches it takes" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("training holds 3 of the 8 batches it takes before its next")
    assert "--stop_sync_steps" in said[0] and said[0].endswith("Said once")
