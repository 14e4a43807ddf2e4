"""`SampleLedger` on two ranks (gloo on CPU) whose streams are uneven: rank 0's ends
first and it trains on its last batches again (padding) while rank 1 finishes. The
ledger marks those batches, and the checker passes: every sample once, the padding
said and not counted."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from held_ports import held_port
from process_tree import run_group

from melissa_trainer.lineage import check, read_runs

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(300)]

DRIVER = Path(__file__).with_name("lineage_ranks_driver.py")
BATCH, SHORT, LONG = 4, 3, 9


def test_padding_on_a_rank_whose_stream_ended_is_marked_and_not_counted(tmp_path: Path) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(held_port()), str(DRIVER), "--output_dir", str(out),
           "--batch_size", str(BATCH), "--buffer", "fifo", "--buffer_size", "16",
           "--report_to", "none", "--disable_progress_bar", "--save_at_end", "false",
           "--stop_sync_steps", "2", "--short", str(SHORT), "--long", str(LONG)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(Path(__file__).parents[2])}  # fmt: skip
    proc = run_group(cmd, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    (run,) = read_runs(out)
    assert run.ranks == 2 and run.end_step == LONG
    pads = [(step, rank) for step, _, pad, rank, _ in run.records if pad]
    assert pads == [(step, 0) for step in range(SHORT + 1, LONG + 1)]  # rank 0's, after its data
    report = check(out, simulations=4)
    assert report.ok, report
    padded = (LONG - SHORT) * BATCH
    assert f"distinct {(SHORT + LONG) * BATCH}; not counted: {padded} padding draws" in str(report)
