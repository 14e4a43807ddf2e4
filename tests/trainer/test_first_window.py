"""Training starts once each rank holds one step's batches, on one rank and on several:
a run's first window is one step, then the windows realign on the multiples of
`stop_sync_steps` (`OnlineTrainer.train`). Under several ranks the agreement on the
next window is started a window ahead, but not before the first multiple, which would
wait for two windows of data first. With a FIFO/FIRO buffer, where each batch is new
data, a study's first step came at 30 s instead of 7 s on two ranks (two windows), then
after a whole window per rank (16 samples on one rank, 32 on two: 7-19 s).

Deterministic: the source fills the buffer only when the trainer reads it
(`IterableSource`), so the samples put when a step ends are what training waited for."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from held_ports import held_port
from process_tree import run_group

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.core.data_wait import WINDOW_NOTICE, DataWait

SCRIPT = Path(__file__).parents[1] / "scripts" / "first_window.py"
BATCH, WINDOW, STEPS = 2, 4, 12


def _run(tmp_path: Path, ranks: int, buffer: str) -> list[dict[str, Any]]:
    """Each rank's record: the samples put into its buffer when each step ended
    (``put_at_step``, keys as strings), the stop agreements run (``collectives``)."""
    out = tmp_path / f"out_{ranks}_{buffer}"
    out.mkdir()
    cmd = [sys.executable, str(SCRIPT)]
    if ranks > 1:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate or "accelerate", "launch", "--multi_gpu", "--num_processes", str(ranks)]
        cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
        cmd += ["--main_process_port", str(held_port()), str(SCRIPT)]
    cmd += ["--output_dir", str(out), "--batch_size", str(BATCH), "--buffer", buffer]
    cmd += ["--buffer_size", str(BATCH), "--stop_sync_steps", str(WINDOW)]
    cmd += ["--max_steps", str(STEPS), "--report_to", "none", "--disable_progress_bar"]
    cmd += ["--save_at_end", "false"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(ranks)]
    assert [r["world_size"] for r in results] == [ranks] * ranks
    return results


def _put(result: dict[str, Any], step: int) -> int:
    return int(result["put_at_step"][str(step)])


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize("buffer", ["fifo", "firo"])
def test_the_first_step_comes_once_each_rank_holds_one_batch_on_one_rank_and_two(
    tmp_path: Path, buffer: str
) -> None:
    """Step 1 comes once each rank holds one batch (before: a whole window, WINDOW
    batches, on one rank and on two; before that, two windows on two). The rest of
    the first window then takes the rest of its batches, and from the first multiple
    of WINDOW on nothing changed: under two ranks a window's steps run once the next
    window's batches are held too (its agreement started ahead), one agreement per
    window, plus the one of the first step."""
    one = _run(tmp_path, 1, buffer)[0]
    assert _put(one, 1) == BATCH
    # the rest of the first window, then each window's batches at its start
    assert [_put(one, s) for s in range(2, STEPS + 1)] == [
        WINDOW * BATCH * (1 + (s - 1) // WINDOW) for s in range(2, STEPS + 1)
    ]
    for rank in _run(tmp_path, 2, buffer):
        assert _put(rank, 1) == BATCH
        assert [_put(rank, s) for s in range(2, WINDOW + 1)] == [WINDOW * BATCH] * (WINDOW - 1)
        # from the second window on: this window's batches and the next one's (the
        # last window has no next one: max_steps)
        windows = [
            min(2 + (s - 1) // WINDOW, STEPS // WINDOW) for s in range(WINDOW + 1, STEPS + 1)
        ]
        assert [_put(rank, s) for s in range(WINDOW + 1, STEPS + 1)] == [
            WINDOW * BATCH * w for w in windows
        ]
        # the first step's agreement, then one per window of WINDOW steps
        assert rank["collectives"] == 1 + STEPS // WINDOW


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
